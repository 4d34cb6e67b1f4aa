"""The front door: one module per command, each thin (parse, resolve, call the library).

__main__.py   `fixedcode <verb>` (also `python -m fixedcode_study <verb>`): the table of verbs
args.py       the one argument convention: a verb's options are one dataclass (the library's own where
              it has one), its fields the `key=value` settings, their docstrings the --help, a bad key
              or value one line and exit 2; other key=value arguments pass through as Hydra overrides
run.py        the Hydra training app (run_line.py: its command line, and Hydra's loop keeping the jobs'
              results); also `python -m fixedcode_study.run`, the study's own command
analyze.py    run directories -> report (the library entry: analysis/entry.py); also `python -m
              analysis` from a checkout
lm_eval_model.py  lm-eval's own command line (its cli_evaluate) with the `fixedcode` model registered
sweep.py describe.py evaluate.py probe.py export.py generate.py pretokenize.py bench.py
bench_input.py bench_output.py eval_tasks.py: the other verbs

Only this package (and config.py, which defines it) composes configs; what it composes it resolves
(spec.JobSpec, spec.evaluation, ...) and hands down. Each module imports only its options at the
top, so `fixedcode <verb> --help` and a bad setting answer before the library loads.
"""
