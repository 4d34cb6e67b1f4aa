"""The front door: one module per command, each thin (parse, resolve, call the library).

__main__.py   `fixedcode <verb>`: the table of verbs (also `python -m fixedcode_study <verb>`)
args.py       the one argument convention (own keys as key=value or their old --flag, Hydra
              overrides passed through, help from the docstring, a bad key one line and exit 2)
run.py        the Hydra training app (run_line.py: its command line, and Hydra's loop keeping the jobs' results)
sweep.py describe.py evaluate.py probe.py export.py generate.py pretokenize.py bench.py
bench_input.py eval_tasks.py lm_eval_model.py: the other verbs

Only this package (and config.py, which defines it) composes configs; what it composes it resolves
(spec.JobSpec, spec.evaluation, ...) and hands down. fixedcode_study/<module>.py are aliases, so
`python -m fixedcode_study.<module>` keeps working. The analysis command is analysis/__main__.py.
"""
