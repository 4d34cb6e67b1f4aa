"""Studies: many jobs at once.

study.py     the sweeps/*.yaml format and its expansion into jobs (Hydra's own sweeper grammar)
cost.py      what a study costs: FLOPs of the built models, tokens, time at a stated rate
rates.py     the rates a cost assumes (the sweep command's settings)
progress.py  what its job directories already hold (completed / stale / partial) and the time the
             rest takes at the speed its own completed jobs ran
grids.py     running a study's grids as `python -m fixedcode_study.run -m ...` subprocesses
launcher.py  hydra/launcher=parallel: a sweep's jobs side by side on one machine, with
planning.py  how many jobs at once, with how many threads
data.py      the sweep's data, prepared once before its jobs start
worker.py    one job in a worker process (terminal, preemption, orphans)
results.py   what each job returns, and the summary of a run or sweep
pairs.py     a study's declared compositions (`pairs:`) composed from its completed jobs (`fixedcode
             compose study=`), each pair waiting, done or (re)composed

Nothing here composes a config: cli/sweep.py composes each job's (and resolves its JobSpec) and
passes it in; the launcher gets each job's composed config from Hydra.
"""
