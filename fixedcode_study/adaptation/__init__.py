"""New tokens after training (issue 44): a model pretrained without a held-out vocabulary H
(train.heldout_fraction, data/heldout.py) adapts on the original tokens, where H occurs.

A learned input table needs a row for every new id; a fixed code gives one for free, but the body
has never seen it. Which adapts faster, and which forgets less? Modules, one job each:
  settings.py   what `fixedcode adapt` takes (import-light, for its --help)
  rows.py       the new rows: the learned table's by each heuristic (random, mean, parts_mean), the
                head's the same way in every arm (a seeded draw, or the mean of the model's own rows)
  measures.py   the loss on H as targets, on the token after an H token, on every other token, and
                the probability mass on H, over the original held-out windows
  run.py        one checkpoint -> the adapt.json record: each init's adaptation curve
"""
