"""Representation formation: what the decoder builds downstream of its input.

`fixedcode probe checkpoint=DIR` probes a final checkpoint, a job directory or a
whole study on held-out text of the jobs' own data, without gradients (states.py reads hidden
states with forward hooks). Layers: `input` (what the input interface gives the first block),
`block1..L` (the residual stream after each block), `final_norm` (what the head reads).

Measures (definitions; code in measures.py and linear.py):
  token identity   held-out accuracy of a linear probe that predicts the token at offset 0, 1 or 2
                   before the position from the hidden state, over the `classes` most frequent
                   types; Wilson 95% intervals. Features are standardised on the fitting rows. The
                   probe (probe.method, linear.py) is regularised LDA by default: closed form, so
                   all 9 models of the main study are probed in seconds each; scikit-learn's
                   multinomial LogisticRegression is the opt-in (about 100x slower here). Baselines: the majority class, and the same probe on
                   the job's *initial* model (same seed, same input: random features). Alain &
                   Bengio 2016, "Understanding intermediate layers using linear classifier probes";
                   Hewitt & Liang 2019 on reading probe accuracy against baselines.
  code bits        for binary codes (binary16, gf2, ...): one linear probe per non-constant bit
                   of the model's own code; at the input layer it must reach accuracy 1.
  type vectors     context-averaged hidden state per frequent token type at each layer (the
                   "emerging embedding"; cf. Ethayarajh 2019's static embeddings from contextual
                   ones). Compared with the input layer of the same model, with a learned model's
                   input table rows for the same types, and between models, by
                     k-NN overlap  mean share of each type's k cosine nearest neighbours in common;
                     RSA           Spearman correlation of the two pairwise-cosine matrices
                                   (Kriegeskorte et al. 2008);
                     linear CKA    Kornblith et al. 2019 (invariant to rotation and isotropic scale).
  cross-model CKA  linear CKA between every layer of two final models on the same tokens; two seeds
                   of one input are the noise floor of the cross-input numbers.
  geometry         effective rank (Roy & Vetterli 2007: exp of the entropy of the normalised
                   singular values of the centered states) and anisotropy (Ethayarajh 2019: mean
                   cosine between random pairs of hidden states).
  over training    all of the above for each step-*.ckpt snapshot of a job (checkpoint.keep_every_steps)
                   and its init, against training tokens.
Outputs: probes.json beside each job's results.json (every probed model of the job) and, for a
study, probes_cross.json in the study directory; `python -m analysis` renders both.
"""
