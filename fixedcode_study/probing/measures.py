"""Representation measures on arrays of hidden states: similarity between two representations of the
same tokens, the geometry of one representation, and context-averaged type vectors.

Rows are tokens (or token types), columns are features; x is (N, d), y is (N, d') with the same N
rows in the same order (d' may differ from d). Everything is computed in float64, whatever the
input dtype (hidden states arrive as float32). A non-finite input gives nan rather than a number
computed from garbage (a diverged model then shows as nan in probes.json instead of crashing a job).

Definitions
-----------
linear_cka(x, y)      Linear centered kernel alignment, Kornblith, Norouzi, Lee & Hinton 2019,
                      "Similarity of Neural Network Representations Revisited" (ICML), feature-space
                      form (their eq. for the linear kernel): with Xc, Yc the column-centered x, y,
                          CKA = ||Yc^T Xc||_F^2 / (||Xc^T Xc||_F * ||Yc^T Yc||_F).
                      In [0, 1]; invariant to orthogonal transforms, isotropic scaling and translation
                      of either side, not to anisotropic scaling. nan when Xc or Yc is all zero.
cosine_matrix(x)      (N, N) pairwise cosine similarity of the rows; a zero row has similarity 0 with
                      every row (itself included).
rsa(x, y)             Representational similarity analysis, Kriegeskorte, Mur & Bandettini 2008,
                      "Representational similarity analysis - connecting the branches of systems
                      neuroscience" (Front. Syst. Neurosci.): Spearman rank correlation between the
                      strict upper triangles (k=1) of cosine_matrix(x) and cosine_matrix(y).
knn_overlap(x, y, k)  Mean over rows i of |kNN_x(i) & kNN_y(i)| / k, where kNN_x(i) are the k rows
                      most cosine-similar to row i in x, i itself excluded; ties are broken by row
                      index (stable sort), so identical inputs give exactly 1. Chance level ~ k/(N-1).
effective_rank(x)     Roy & Vetterli 2007, "The effective rank: a measure of effective
                      dimensionality" (EUSIPCO): s = singular values of the column-centered x,
                      p = s / sum(s), erank = exp(-sum_{p>0} p log p). In [1, min(N, d)].
anisotropy(x, pairs)  Ethayarajh 2019, "How Contextual are Contextualized Word Representations?"
                      (EMNLP): the mean cosine similarity between random pairs of distinct rows of the
                      *uncentered* x (a common offset makes it near 1, an isotropic cloud near 0).
                      `pairs` ordered pairs (i, j), i != j, drawn uniformly with
                      numpy.random.default_rng(seed); when N(N-1)/2 <= pairs, the exact mean over all
                      unordered pairs instead.
type_vectors(states, ids, types)
                      Context-averaged type vectors (cf. Ethayarajh 2019's static embeddings from
                      contextual ones; Bommasani et al. 2020): for each type t, the mean of the rows
                      of `states` whose token id is t, with the count of those rows; a type that never
                      occurs gets a nan row and count 0. TypeVectorSums accumulates the same over
                      streamed batches.

rsa and knn_overlap hold (N, N) matrices: meant for type vectors (a few hundred rows), not for every
token of a sample.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

__all__ = ["linear_cka", "cosine_matrix", "rsa", "knn_overlap", "effective_rank", "anisotropy",
           "type_vectors", "TypeVectorSums"]


# ----------------------------------------------------------------------------------------- inputs

def _matrix(a: np.ndarray, name: str, where: str) -> np.ndarray:
    """`a` as a 2-D float64 array (a copy only when the dtype changes)."""
    a = np.asarray(a)
    if a.ndim != 2:
        raise ValueError(f"{where}: {name} must be 2-D (rows x features), got shape {a.shape}")
    return a.astype(np.float64, copy=False)


def _pair(x: np.ndarray, y: np.ndarray, where: str) -> tuple[np.ndarray, np.ndarray]:
    """Two representations of the same rows: same N, any widths."""
    x, y = _matrix(x, "x", where), _matrix(y, "y", where)
    if len(x) != len(y):
        raise ValueError(f"{where}: y has {len(y)} rows but x has {len(x)} "
                         "(rows must be the same tokens in the same order)")
    return x, y


def _finite(*arrays: np.ndarray) -> bool:
    return all(bool(np.isfinite(a).all()) for a in arrays)


def _center(x: np.ndarray) -> np.ndarray:
    """Column-centered copy of x (N, d). Columns that are exactly constant become exactly zero:
    the float mean of N equal numbers need not equal them, and that rounding residue must not pass
    for variance (e.g. the constant high bits of a tiled binary code)."""
    xc = x - x.mean(axis=0, keepdims=True)
    if len(x):
        xc[:, (x == x[:1]).all(axis=0)] = 0.0
    return xc


def _unit_rows(x: np.ndarray) -> np.ndarray:
    """Rows scaled to unit norm; zero rows stay zero (so their cosine with anything is 0)."""
    norms = np.linalg.norm(x, axis=1, keepdims=True)  # (N, 1)
    return np.divide(x, norms, out=np.zeros_like(x), where=norms > 0)


# ----------------------------------------------------------------------------- similarity of two

def linear_cka(x: np.ndarray, y: np.ndarray) -> float:
    """Linear CKA (Kornblith et al. 2019) of x (N, d) and y (N, d'); nan if either has no variance."""
    x, y = _pair(x, y, "linear_cka")
    if not _finite(x, y):
        return float("nan")
    xc, yc = _center(x), _center(y)
    if not xc.any() or not yc.any():
        return float("nan")
    # feature-space form: d x d' Gram products instead of N x N kernels (N >> d here)
    cross = np.linalg.norm(yc.T @ xc) ** 2          # ||Yc^T Xc||_F^2, (d', d) inside
    self_x = np.linalg.norm(xc.T @ xc)              # ||Xc^T Xc||_F, (d, d) inside
    self_y = np.linalg.norm(yc.T @ yc)              # ||Yc^T Yc||_F, (d', d') inside
    return float(cross / (self_x * self_y))


class CenteredLayers:
    """Every layer of one model, centered and stacked once, for many linear_cka calls against other
    models: one (sum d, sum d') matrix product per pair of models instead of one per pair of layers."""

    def __init__(self, layers: list[np.ndarray]):
        if not layers or len({len(h) for h in layers}) != 1:
            raise ValueError("CenteredLayers: layers must be a non-empty list of (N, d) arrays with one N")
        self.widths = [h.shape[1] for h in layers]
        self.stacked = np.concatenate([_center(np.asarray(h, dtype=np.float64)) for h in layers], axis=1)
        self.bounds = np.cumsum([0, *self.widths])
        self.self_norms = np.array([np.linalg.norm(self.block(i).T @ self.block(i)) for i in range(len(layers))])

    def block(self, i: int) -> np.ndarray:
        return self.stacked[:, self.bounds[i]:self.bounds[i + 1]]


def cka_matrix(a: CenteredLayers, b: CenteredLayers) -> np.ndarray:
    """(layers of a, layers of b) linear CKA of every pair of layers: equal to linear_cka per pair."""
    if len(a.stacked) != len(b.stacked):
        raise ValueError(f"cka_matrix: a has {len(a.stacked)} rows but b has {len(b.stacked)}")
    cross = a.stacked.T @ b.stacked  # (sum d_a, sum d_b): every layer pair's Xc^T Yc at once
    out = np.full((len(a.widths), len(b.widths)), np.nan)
    for i in range(len(a.widths)):
        for j in range(len(b.widths)):
            denom = a.self_norms[i] * b.self_norms[j]
            if denom > 0:
                block = cross[a.bounds[i]:a.bounds[i + 1], b.bounds[j]:b.bounds[j + 1]]
                out[i, j] = np.sum(block * block) / denom
    return out


def cosine_matrix(x: np.ndarray) -> np.ndarray:
    """(N, N) pairwise cosine similarity of the rows of x (N, d); zero rows give 0."""
    u = _unit_rows(_matrix(x, "x", "cosine_matrix"))  # (N, d)
    return u @ u.T


def rsa(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman correlation of the upper triangles of the two cosine matrices (Kriegeskorte et al. 2008)."""
    x, y = _pair(x, y, "rsa")
    if len(x) < 3:
        raise ValueError(f"rsa: needs at least 3 rows (2 pairs) to correlate, got {len(x)}")
    if not _finite(x, y):
        return float("nan")
    upper = np.triu_indices(len(x), k=1)             # N(N-1)/2 pairs, diagonal excluded
    a, b = cosine_matrix(x)[upper], cosine_matrix(y)[upper]
    if np.all(a == a[0]) or np.all(b == b[0]):
        return float("nan")                          # a rank correlation with a constant is undefined
    return float(stats.spearmanr(a, b).statistic)


def _neighbours(x: np.ndarray, k: int) -> np.ndarray:
    """(N, k) indices of each row's k most cosine-similar other rows, ties by row index."""
    sim = cosine_matrix(x)                           # (N, N)
    np.fill_diagonal(sim, -np.inf)                   # a row is not its own neighbour
    return np.argsort(-sim, axis=1, kind="stable")[:, :k]


def knn_overlap(x: np.ndarray, y: np.ndarray, k: int = 10) -> float:
    """Mean share of each row's k cosine nearest neighbours (itself excluded) common to x and y."""
    x, y = _pair(x, y, "knn_overlap")
    n = len(x)
    if not 1 <= k < n:
        raise ValueError(f"knn_overlap: k must be in [1, N-1] = [1, {n - 1}], got k={k}")
    if not _finite(x, y):
        return float("nan")
    nx, ny = _neighbours(x, k), _neighbours(y, k)    # (N, k) each
    rows = np.arange(n)[:, None]
    in_x = np.zeros((n, n), dtype=bool)
    in_x[rows, nx] = True                            # in_x[i, j]: j is among i's neighbours in x
    shared = in_x[rows, ny].sum(axis=1)              # (N,) |kNN_x(i) & kNN_y(i)|
    return float(shared.mean() / k)


# ------------------------------------------------------------------------------ geometry of one

def effective_rank(x: np.ndarray) -> float:
    """Roy & Vetterli 2007: exp of the entropy of the normalised singular values of the centered x."""
    x = _matrix(x, "x", "effective_rank")
    if not _finite(x):
        return float("nan")
    s = np.linalg.svd(_center(x), compute_uv=False)  # (min(N, d),)
    total = s.sum()
    if total <= 0:
        return float("nan")                          # no variance: no spectrum to normalise
    p = s[s > 0] / total
    return float(np.exp(-(p * np.log(p)).sum()))


def anisotropy(x: np.ndarray, pairs: int = 2000, seed: int = 0) -> float:
    """Ethayarajh 2019: mean cosine similarity of random pairs of distinct (uncentered) rows."""
    x = _matrix(x, "x", "anisotropy")
    n = len(x)
    if n < 2:
        raise ValueError(f"anisotropy: needs at least 2 rows, got {n}")
    if pairs < 1:
        raise ValueError(f"anisotropy: pairs must be >= 1, got {pairs}")
    if not _finite(x):
        return float("nan")
    if n * (n - 1) // 2 <= pairs:
        # every pair is cheaper than (and exactly what) the sample estimates
        return float(cosine_matrix(x)[np.triu_indices(n, k=1)].mean())
    rng = np.random.default_rng(seed)
    i = rng.integers(0, n, size=pairs)
    j = rng.integers(0, n - 1, size=pairs)
    j += j >= i                                      # uniform over the n - 1 rows other than i
    u = _unit_rows(x)
    return float(np.einsum("pd,pd->p", u[i], u[j]).mean())


# ----------------------------------------------------------------------------------- type vectors

def _type_index(ids: np.ndarray, types: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each id: the position of its type in `types`, and whether it is one of them at all."""
    order = np.argsort(types, kind="stable")
    sorted_types = types[order]
    pos = np.searchsorted(sorted_types, ids)         # (N,) insertion points
    pos = np.minimum(pos, len(types) - 1)
    known = sorted_types[pos] == ids                 # (N,) id is a listed type
    return order[pos], known


def _check_types(types: np.ndarray, where: str) -> np.ndarray:
    types = np.asarray(types)
    if types.ndim != 1 or not np.issubdtype(types.dtype, np.integer):
        raise ValueError(f"{where}: types must be a 1-D integer array, got shape {types.shape} "
                         f"dtype {types.dtype}")
    if len(np.unique(types)) != len(types):
        raise ValueError(f"{where}: types has repeated ids")
    return types


def _type_sums(states: np.ndarray, ids: np.ndarray, types: np.ndarray,
               where: str) -> tuple[np.ndarray, np.ndarray]:
    """(sums (T, d) float64, counts (T,) int64) of the rows of states per type; other ids are ignored."""
    states = _matrix(states, "states", where)
    ids = np.asarray(ids)
    if ids.ndim != 1 or not np.issubdtype(ids.dtype, np.integer):
        raise ValueError(f"{where}: ids must be a 1-D integer array, got shape {ids.shape} dtype {ids.dtype}")
    if len(ids) != len(states):
        raise ValueError(f"{where}: ids has {len(ids)} entries but states has {len(states)} rows")
    sums = np.zeros((len(types), states.shape[1]))
    counts = np.zeros(len(types), dtype=np.int64)
    if len(types) == 0 or len(ids) == 0:
        return sums, counts
    index, known = _type_index(ids, types)
    index, rows = index[known], states[known]
    # sort rows by type, then one reduceat over the contiguous runs (no Python loop over types)
    by_type = np.argsort(index, kind="stable")
    index, rows = index[by_type], rows[by_type]
    present, starts, run = np.unique(index, return_index=True, return_counts=True)
    if len(present):
        sums[present] = np.add.reduceat(rows, starts, axis=0)
        counts[present] = run
    return sums, counts


def _means(sums: np.ndarray, counts: np.ndarray) -> np.ndarray:
    means = np.full_like(sums, np.nan)
    seen = counts > 0
    means[seen] = sums[seen] / counts[seen, None]
    return means


def type_vectors(states: np.ndarray, ids: np.ndarray, types: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Context-averaged type vectors: (means (T, d) float64, counts (T,) int64) for T = len(types).

    states (N, d): hidden states; ids (N,): the token id of each row; types (T,): distinct token ids.
    Row t of means is the mean of the rows whose id is types[t] (nan if there is none); ids not in
    types are ignored.
    """
    types = _check_types(types, "type_vectors")
    sums, counts = _type_sums(states, ids, types, "type_vectors")
    return _means(sums, counts), counts


class TypeVectorSums:
    """Streaming type_vectors: add batches of (states, ids), then means() equals type_vectors over
    all the rows added (up to float64 summation order)."""

    def __init__(self, types: np.ndarray, d: int):
        self.types = _check_types(types, "TypeVectorSums")
        self.d = int(d)
        self.sums = np.zeros((len(self.types), self.d))           # (T, d) float64
        self.counts = np.zeros(len(self.types), dtype=np.int64)   # (T,)

    def add(self, states: np.ndarray, ids: np.ndarray) -> None:
        states = np.asarray(states)
        if states.ndim != 2 or states.shape[1] != self.d:
            raise ValueError(f"TypeVectorSums.add: states must be (N, {self.d}), got shape {states.shape}")
        sums, counts = _type_sums(states, ids, self.types, "TypeVectorSums.add")
        self.sums += sums
        self.counts += counts

    def means(self) -> np.ndarray:
        """(T, d) float64 mean state per type so far; nan rows for types not seen yet (see .counts)."""
        return _means(self.sums, self.counts)
