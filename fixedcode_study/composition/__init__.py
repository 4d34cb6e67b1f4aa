"""Composing two trained models (issue 44): does a shared fixed input make two models easier to combine?

Three measures of a pair of models that share vocabulary, data and architecture (differing by seed,
or by the half of the corpus they trained on), each in its own module:
  ensemble.py    the logit-averaged ensemble's held-out loss and its gain over the better member
                 (and the probability mixture beside it);
  stitch.py      model stitching (Bansal, Nakkiran & Barak, arXiv 2106.07682): blocks 0..k-1 of a,
                 a stitch, blocks k.. of b and b's final norm and head, at every k in 0..n_layer, with
                 an identity stitch and a trained affine one (everything else frozen);
  barrier.py     the loss along the straight line between the two weight sets (11 points, no
                 alignment of units), and its barrier over the line between the endpoint losses.
Beside them: settings.py (what `fixedcode compose` takes, import-light for its --help), pair.py
(loading the two members and refusing a pair that does not match, in one line naming the field),
validation.py (a model's held-out loss and bits per byte, computed by training's own final
validation), run.py (the measures of one pair -> the compose.json record) and declared.py (a study
file's `pairs:`: which pairs of its jobs `fixedcode compose study=` composes, under which settings).
"""
