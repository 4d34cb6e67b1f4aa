"""Linear probes (Alain & Bengio 2016, "Understanding intermediate layers using linear classifier
probes"): how much of a label a linear read-out of a hidden state recovers on held-out rows.

Definitions
-----------
probe(train_x, train_y, test_x, test_y)
    Features are standardised with the mean and standard deviation of the *training* rows
    (sklearn StandardScaler; a constant feature is only centered), then a linear classifier is
    fitted on the training rows, by `method`:
      lda         (default) regularised linear discriminant analysis (Friedman 1989, "Regularized
                  discriminant analysis"; Hastie et al., ESL 4.3): class means m_c, the pooled
                  within-class covariance S_w plus `ridge` * I (in standardised units, where every
                  feature's total variance is 1), score_c(x) = x' S^-1 m_c - m_c' S^-1 m_c / 2 +
                  log prior_c, predict the arg-max. Closed form (one d x d solve for all classes):
                  milliseconds per probe. The ridge keeps S invertible where S_w is singular, e.g.
                  at the input layer, where every occurrence of a token has the same vector and the
                  rule becomes nearest class mean.
      logistic    sklearn LogisticRegression (lbfgs, multinomial for more than two classes, C and
                  max_iter as given). The classic probe; at 256 classes on 4-8k rows it needs
                  seconds per fit on 2 cores and its accuracy still moves with max_iter (measured on
                  the CPU main study: 0.66 at 30 iterations, 0.72 at 100), so it is the opt-in.
    Both are linear read-outs (scores linear in x). Reported on the test rows:
      accuracy    share of test rows whose predicted label equals the true one. A test label that
                  never occurs in training cannot be predicted and counts as an error: such rows
                  stay in the denominator (n_unseen says how many there were), so a probe is never
                  flattered by dropping what it could not learn.
      ci_low/high Wilson 95% score interval of that accuracy (Wilson 1927, "Probable inference, the
                  law of succession, and statistical inference", JASA).
      majority    test accuracy of always predicting the most frequent training label (smallest
                  label among ties): the baseline to read accuracy against (Hewitt & Liang 2019).
      converged   False when lbfgs stopped on max_iter or a failed line search (scikit-learn's
                  ConvergenceWarning, silenced here): the accuracy is still the held-out accuracy
                  of the probe as fitted.
    One training class: no fit; the constant predictor of that class is reported (n_classes=1).
probe_bits(train_x, train_bits, test_x, test_bits)
    For a binary token code, bits (N, K) in {0, 1}: one binary probe per bit on the same
    standardised features (a two-class LDA or LogisticRegression per bit). Bits constant over the training
    rows carry no learnable signal; they are not fitted, listed in constant_bits and left out of
    the means.
Everything is float64. Empty test sets give nan accuracies; non-finite features raise ValueError.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from scipy import linalg, sparse
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler

__all__ = ["ProbeResult", "wilson_interval", "probe", "probe_bits"]

Z95 = 1.959963984540054  # two-sided 95% standard normal quantile


def wilson_interval(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for k successes in n trials; (nan, nan) when n == 0.

    Unlike the normal (Wald) interval it stays inside [0, 1] and does not collapse to a point at
    k = 0 or k = n, which probe accuracies of exactly 1 make matter."""
    if n < 0 or not 0 <= k <= n:
        raise ValueError(f"wilson_interval: need 0 <= k <= n, got k={k}, n={n}")
    if n == 0:
        return float("nan"), float("nan")
    p = k / n
    z2 = z * z
    denom = 1.0 + z2 / n
    center = (p + z2 / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom
    return max(0.0, center - half), min(1.0, center + half)


@dataclass
class ProbeResult:
    """Held-out result of one linear probe (definitions: module docstring)."""

    accuracy: float
    ci_low: float
    ci_high: float
    n_train: int
    n_test: int
    n_classes: int      # distinct labels in the training rows (what the probe can predict)
    majority: float     # held-out accuracy of the most frequent training label
    converged: bool
    n_unseen: int = 0   # test rows whose label never occurs in training (counted as errors)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# ----------------------------------------------------------------------------------------- inputs

def _features(a: np.ndarray, name: str, where: str) -> np.ndarray:
    a = np.asarray(a)
    if a.ndim != 2:
        raise ValueError(f"{where}: {name} must be 2-D (rows x features), got shape {a.shape}")
    a = a.astype(np.float64, copy=False)
    if not np.isfinite(a).all():
        raise ValueError(f"{where}: {name} has non-finite values")
    return a


def _check_rows(x: np.ndarray, y: np.ndarray, x_name: str, y_name: str, where: str) -> None:
    if len(y) != len(x):
        raise ValueError(f"{where}: {y_name} has {len(y)} rows but {x_name} has {len(x)}")


def _check_width(train_x: np.ndarray, test_x: np.ndarray, where: str) -> None:
    if train_x.shape[1] != test_x.shape[1]:
        raise ValueError(f"{where}: test_x has {test_x.shape[1]} features but train_x has {train_x.shape[1]}")
    if len(train_x) == 0:
        raise ValueError(f"{where}: train_x has no rows to fit")


def _labels(y: np.ndarray, name: str, where: str) -> np.ndarray:
    y = np.asarray(y)
    if y.ndim != 1:
        raise ValueError(f"{where}: {name} must be 1-D, got shape {y.shape}")
    return y


def _standardise(train_x: np.ndarray, test_x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Both sets scaled with the training rows' statistics only (the test rows stay unseen)."""
    scaler = StandardScaler().fit(train_x)
    return scaler.transform(train_x), scaler.transform(test_x)


# ---------------------------------------------------------------------------------------- fitting

def _majority_label(train_y: np.ndarray) -> Any:
    labels, counts = np.unique(train_y, return_counts=True)
    return labels[np.argmax(counts)]                 # argmax: the smallest label among ties


METHODS = ("lda", "logistic")


def _lda_fit_predict(train_x: np.ndarray, train_y: np.ndarray, test_x: np.ndarray, ridge: float) -> np.ndarray:
    """Regularised LDA (module docstring): fit on the training rows, predict the test rows."""
    classes, label = np.unique(train_y, return_inverse=True)  # label: (N,) class index per row
    n, d = train_x.shape
    counts = np.bincount(label, minlength=len(classes))        # (C,)
    members = sparse.csr_matrix((np.ones(n), (label, np.arange(n))), shape=(len(classes), n))
    means = np.asarray(members @ train_x) / counts[:, None]    # (C, d)
    # Pooled within-class scatter = sum x x' - sum_c n_c m_c m_c' (no (N, d) copy of deviations);
    # divided by N (maximum likelihood), as scikit-learn's LDA does.
    within = (train_x.T @ train_x - (means.T * counts) @ means) / n
    covariance = within + ridge * np.eye(d)
    try:
        weights = linalg.cho_solve(linalg.cho_factor(covariance), means.T)  # (d, C) = S^-1 m_c
    except linalg.LinAlgError:  # ridge 0 on a singular covariance: the least-squares solution
        weights = linalg.lstsq(covariance, means.T)[0]
    bias = -0.5 * np.einsum("cd,dc->c", means, weights) + np.log(counts / n)
    return classes[np.argmax(test_x @ weights + bias, axis=1)]


def _fit_predict(train_x: np.ndarray, train_y: np.ndarray, test_x: np.ndarray, *,
                 max_iter: int, C: float, seed: int, method: str = "lda",
                 ridge: float = 0.01) -> tuple[np.ndarray, bool]:
    """Fit one linear classifier on standardised features; (test predictions, converged)."""
    if method not in METHODS:
        raise ValueError(f"probe.method: {method!r} is not one of {', '.join(METHODS)}")
    if method == "lda":
        return _lda_fit_predict(train_x, train_y, test_x, ridge), True
    model = LogisticRegression(C=C, max_iter=max_iter, random_state=seed)
    with warnings.catch_warnings(record=True) as caught:
        # recorded instead of shown: a probe stopped at max_iter is expected, its flag is the record
        warnings.simplefilter("always", ConvergenceWarning)
        model.fit(train_x, train_y)
    converged = True
    for w in caught:
        if issubclass(w.category, ConvergenceWarning):
            converged = False
        else:                                        # anything else still reaches the caller
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    if len(test_x) == 0:
        return np.empty(0, dtype=train_y.dtype), converged
    return model.predict(test_x), converged


def _result(pred: np.ndarray, train_y: np.ndarray, test_y: np.ndarray, n_classes: int,
            converged: bool) -> ProbeResult:
    n_test = len(test_y)
    correct = int((pred == test_y).sum())
    majority_hits = int((test_y == _majority_label(train_y)).sum())
    low, high = wilson_interval(correct, n_test)
    return ProbeResult(
        accuracy=correct / n_test if n_test else float("nan"),
        ci_low=low, ci_high=high,
        n_train=len(train_y), n_test=n_test, n_classes=n_classes,
        majority=majority_hits / n_test if n_test else float("nan"),
        converged=converged,
        n_unseen=int((~np.isin(test_y, train_y)).sum()),
    )


def probe(train_x: np.ndarray, train_y: np.ndarray, test_x: np.ndarray, test_y: np.ndarray, *,
          max_iter: int = 200, C: float = 1.0, seed: int = 0, method: str = "lda",
          ridge: float = 0.01) -> ProbeResult:
    """Held-out accuracy of a linear probe (regularised LDA or multinomial logistic) from features (N, d) to labels (N,)."""
    where = "probe"
    train_x, test_x = _features(train_x, "train_x", where), _features(test_x, "test_x", where)
    train_y, test_y = _labels(train_y, "train_y", where), _labels(test_y, "test_y", where)
    _check_rows(train_x, train_y, "train_x", "train_y", where)
    _check_rows(test_x, test_y, "test_x", "test_y", where)
    _check_width(train_x, test_x, where)
    n_classes = len(np.unique(train_y))
    if n_classes == 1:
        # nothing to fit: every row gets the one training label
        return _result(np.full(len(test_y), train_y[0]), train_y, test_y, 1, True)
    train_s, test_s = _standardise(train_x, test_x)
    pred, converged = _fit_predict(train_s, train_y, test_s, max_iter=max_iter, C=C, seed=seed,
                                   method=method, ridge=ridge)
    return _result(pred, train_y, test_y, n_classes, converged)


def _bits(b: np.ndarray, name: str) -> np.ndarray:
    b = np.asarray(b)
    if b.ndim != 2:
        raise ValueError(f"probe_bits: {name} must be 2-D (rows x bits), got shape {b.shape}")
    if not np.isin(b, (0, 1)).all():
        raise ValueError(f"probe_bits: {name} must hold only 0 and 1")
    return b.astype(np.int8)


def probe_bits(train_x: np.ndarray, train_bits: np.ndarray, test_x: np.ndarray, test_bits: np.ndarray, *,
               max_iter: int = 200, C: float = 1.0, seed: int = 0, method: str = "lda",
               ridge: float = 0.01) -> dict[str, Any]:
    """One binary probe per non-constant code bit; per-bit and summary held-out accuracies.

    Returns {"per_bit": [accuracy, or None for a constant bit], "mean_accuracy", "min_accuracy",
    "majority_mean" (means over the fitted bits; None when no bit varies), "constant_bits": [index],
    "n_train", "n_test", "converged" (every fitted probe converged)}.
    """
    where = "probe_bits"
    train_x, test_x = _features(train_x, "train_x", where), _features(test_x, "test_x", where)
    train_bits, test_bits = _bits(train_bits, "train_bits"), _bits(test_bits, "test_bits")
    _check_rows(train_x, train_bits, "train_x", "train_bits", where)
    _check_rows(test_x, test_bits, "test_x", "test_bits", where)
    _check_width(train_x, test_x, where)
    if train_bits.shape[1] != test_bits.shape[1]:
        raise ValueError(f"{where}: test_bits has {test_bits.shape[1]} bits but train_bits has {train_bits.shape[1]}")
    n_bits = train_bits.shape[1]
    constant = [b for b in range(n_bits) if (train_bits[:, b] == train_bits[0, b]).all()]
    train_s, test_s = _standardise(train_x, test_x)  # once, shared by every bit's probe
    per_bit: list[float | None] = [None] * n_bits
    majority: list[float] = []
    converged = True
    for b in range(n_bits):
        if b in constant:
            continue
        pred, ok = _fit_predict(train_s, train_bits[:, b], test_s, max_iter=max_iter, C=C, seed=seed,
                                method=method, ridge=ridge)
        r = _result(pred, train_bits[:, b], test_bits[:, b], 2, ok)
        per_bit[b] = r.accuracy
        majority.append(r.majority)
        converged &= ok
    fitted = [a for a in per_bit if a is not None]
    return {
        "per_bit": per_bit,
        "mean_accuracy": float(np.mean(fitted)) if fitted else None,
        "min_accuracy": float(np.min(fitted)) if fitted else None,
        "constant_bits": constant,
        "n_train": int(len(train_x)),
        "n_test": int(len(test_x)),
        "majority_mean": float(np.mean(majority)) if majority else None,
        "converged": converged,
    }
