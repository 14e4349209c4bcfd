"""What a Rényi fit reads from a Summary: the features it can use, the DP noise in γ̂, the automatic ridge.

:func:`discrete_problem` resolves the features (every feature whose pair tables were
released, or the ones asked for) and the summary restricted to them; :func:`noise_sd` is the
standard deviation of the DP noise in γ̂(z, b) for a fixed fit (the noise margin the fit must
beat the prior by); :func:`auto_ridge` the ridge a noisy summary gets when none is given. The
estimator is :class:`marg.learners.classifiers.renyi.RenyiClassifier`.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from marg.errors import InputError

from ..features.quadratic import paired_features


def discrete_problem(summary: Any, features: Sequence[str] | None) -> tuple[list[str], Any]:
    """Resolve the feature names and the (possibly restricted) summary to fit on."""
    cb = summary.codebook
    if features is None:
        names = paired_features(summary)
    else:  # a list (check_params refused a bare string)
        names = [str(f) for f in features]
        seen: set[str] = set()
        for nm in names:
            cb.index(nm)
            if nm in seen:
                raise InputError(f"feature {nm!r} listed twice in features")
            seen.add(nm)
        names = sorted(names, key=cb.index)
    for nm in names:
        if not cb.feature(nm).is_discrete:
            raise InputError(
                f"the Rényi classifier needs discrete features; {nm!r} is raw numeric (give it bin edges)"
            )
    if not names:
        return names, None
    sub = summary if names == list(cb.feature_names) else summary.restrict(names)
    return names, sub


def noise_sd(summary: Any, names: Sequence[str], sizes: Sequence[int], z: np.ndarray, b: float, positive: int) -> float:
    """Std of the DP noise in γ̂(z, b) = Ê[(b + Wᵀz − C)²], for fixed (z, b).

    Expanding, γ(z, b) = b² + 2b·Σ z_ia P_i(a) − 2b·E[C] + Σ z_ia² P_i(a)
    + 2 Σ_{i<j} Σ_ab z_ia z_jb P_ij(a, b) − Σ z_ia d_i(a) + 1/4 is *linear* in the released
    probabilities, so its noise is a weighted sum of the tables' independent cell noises:

    - first-order cell (a, y) of feature i: weight 2b·z_ia + z_ia² − s_y·z_ia;
    - pair cell (a, b, ·) of features i, j: weight 2·z_ia·z_jb;
    - label cell y: weight −b·s_y,

    with s_y = +1 for the positive class and −1 otherwise, each cell's noise std from the
    summary's noise records (count std / n; the raw released noise, an upper bound for the
    post-processed tables). Returns sqrt(Σ weight² · std²).
    """
    lab = summary.codebook.label.name
    K = summary.n_classes
    n = float(summary.n)
    s_y = np.where(np.arange(K) == positive, 1.0, -1.0)
    off = np.concatenate([[0], np.cumsum(np.asarray(sizes, dtype=np.int64))])
    zs = [np.asarray(z[off[i]:off[i + 1]], dtype=np.float64) for i in range(len(names))]
    var = (summary.count_noise_std((lab,)) / n) ** 2 * float(np.sum((b * s_y) ** 2))
    for nm, zi in zip(names, zs):
        sig = summary.count_noise_std((nm, lab)) / n
        coef = (2.0 * b * zi + zi**2)[:, None] - zi[:, None] * s_y[None, :]
        var += sig**2 * float(np.sum(coef**2))
    for i in range(len(names)):
        for j in range(i + 1, len(names)):
            sig = summary.count_noise_std((names[i], names[j])) / n
            var += 4.0 * sig**2 * float(zs[i] @ zs[i]) * float(zs[j] @ zs[j])
    return float(np.sqrt(var))


RIDGE_PER_NOISE = 0.35
"""The automatic ridge under noise is this multiple of σ_Q·√M (see :func:`auto_ridge`)."""


def auto_ridge(summary: Any, names: Sequence[str], M: int) -> float:
    """The ridge for a noisy summary: ``RIDGE_PER_NOISE``·σ_Q·√M; 0 for an exact one.

    σ_Q is the root-mean-square noise std of the pair cells of Q in probability units
    (count noise std / n, from the released tables' records), so σ_Q·√M is the order of
    the spectral norm of Q's noise matrix (M × M with independent entries): the ridge
    dominates the noise's eigenvalues, so the solve no longer follows them (the unregularised fit's error
    on DP adult: BENCHMARKS.md, "Issue 47: numbers moved out of docstrings"). Set from the recorded noise
    and n only — never from test data; the multiple 0.35 (0.5 per released (x_i, x_j, y) cell with a binary
    label) was the best of a small grid on adult over ε = 0.25…4 (the same section) and is shared by every
    dataset.
    """
    if not summary.is_noisy or M == 0:
        return 0.0
    n = float(summary.n)
    stds = [summary.count_noise_std((a, b)) / n for i, a in enumerate(names) for b in names[i + 1:]]
    if not stds:
        stds = [summary.count_noise_std((a,)) / n for a in names]
    sigma = float(np.sqrt(np.mean(np.square(stds)))) if stds else 0.0
    return RIDGE_PER_NOISE * sigma * float(np.sqrt(M))


def sampling_ridge(summary: Any, names: Sequence[str]) -> float:
    """The ridge against the sampling noise of n rows: ``RIDGE_PER_NOISE``·σ_S·√M.

    The same rule as :func:`auto_ridge` with the DP noise replaced by the sampling noise of
    Q's pair cells: a pair cell with probability q = P(x_i = a, x_j = b) is estimated from n
    rows with std √(q(1 − q)/n); σ_S is the root mean square of that over every pair cell of
    different features, with q taken as p_ia·p_jb from the first-order tables (the pair
    tables of thousands of genes need not be read), and M = Σ m_i the indicator count. With
    tens of rows and hundreds of genes (M ≫ n) the unregularised least squares interpolates
    the training rows; on the 10 folds of colon, arcene and ALLAML with the pairs of the top 200
    genes, ridge 0.3 (this rule's size there) erred less than ridge 0 on colon and arcene and the same on
    ALLAML (BENCHMARKS.md, "Screen, then learn on the gene sets" and "Issue 47: numbers moved out of
    docstrings"). Used where Rényi is fitted on exact tables without a GCV choice
    (the one-site simulation's training sets); 0 for no features.
    """
    if not names:
        return 0.0
    ps = [np.clip(summary.counts((nm,)), 0.0, None) for nm in names]
    p = np.concatenate([c / max(float(c.sum()), 1e-300) for c in ps])
    blk = np.repeat(np.arange(len(ps)), [c.size for c in ps])
    q = np.outer(p, p)[blk[:, None] != blk[None, :]]
    if q.size == 0:
        return 0.0
    sigma = float(np.sqrt(np.mean(q * (1.0 - q)) / max(float(summary.n), 1.0)))
    return RIDGE_PER_NOISE * sigma * float(np.sqrt(p.size))


GCV_RIDGES: tuple[float, ...] = (0.01, 0.03, 0.1, 0.3, 1.0, 3.0)
"""The ridges :func:`gcv_path` tries (probability units, as ``RenyiClassifier.ridge``)."""


def gcv_path(summary: Any, ranked: Sequence[str], sizes: Sequence[int],
             ridges: Sequence[float] = GCV_RIDGES) -> list[tuple[int, float, float]]:
    """Generalized cross-validation of the Rényi fit on the top M of ``ranked``, for every (M, ridge).

    Rényi is least squares of C = 1{Y = c} − 1/2 on the one-hot indicators W:
    minimise (1/n)‖Wz + b − C‖² + ridge·‖z‖², i.e. zᵀQ_c z − d_cᵀz + ridge·‖z‖². Its hat
    matrix H = W_c (W_cᵀW_c + n·ridge·I)⁻¹ W_cᵀ (plus the intercept) has trace
    df = 1 + Σ_k λ_k / (λ_k + ridge), λ the eigenvalues of Q_c = W_cᵀW_c / n, and the
    training mean square is γ (:mod:`marg.learners.classifiers.renyi_problem`). Both come from the pair
    tables, so the generalized cross-validation score (Golub, Heath & Wahba 1979)

        GCV(M, ridge) = γ / (1 − df/n)²,

    a rotation-invariant version of the leave-one-out error of the least-squares fit, needs no
    row. With K > 2 classes γ is the sum over the one-vs-rest problems. It sees what a
    simulation from the tables cannot: correlated features add to df but not to the fit.

    Parameters
    ----------
    summary : Summary
        Exact tables holding the pair tables of the top ``max(sizes)`` features of ``ranked``.
    ranked : sequence of str
        Discrete features, best first.
    sizes : sequence of int
        The numbers M of top features tried; M = 0 is the intercept alone — the larger class, the
        label-only rule — with df = 1 and γ = Σ_c π_c(1 − π_c) (its GCV the same at every ridge).
    ridges : sequence of float

    Returns
    -------
    list of (M, ridge, GCV)
        GCV is inf where df ≥ n.
    """
    from ..features.quadratic import discrete_blocks, label_contrast, second_moments
    from .renyi_problem import min_norm_solve, psd_eigh, quadratic_value

    cb = summary.codebook
    names = sorted(ranked[: max(sizes)], key=cb.index)
    sub = summary.restrict(names)
    Q = second_moments(sub)
    blocks = discrete_blocks(sub.codebook)
    K, n = summary.n_classes, float(summary.n)
    prior = np.asarray(summary.prior, dtype=np.float64)
    positives = [1] if K == 2 else list(range(K))
    ds = [label_contrast(sub, c if K > 2 else None) for c in positives]
    out: list[tuple[int, float, float]] = []
    for M in sizes:
        if int(M) == 0:  # no feature: the intercept alone, the larger class (the label-only rule), df = 1
            gam0 = sum(float(prior[c]) * (1.0 - float(prior[c])) for c in positives)
            out += [(0, float(r), gam0 / (1.0 - 1.0 / n) ** 2 if n > 1 else float("inf")) for r in ridges]
            continue
        keep = set(ranked[:M])
        idx = np.concatenate([np.arange(b.offset, b.offset + b.size) for b in blocks if b.name in keep])
        Qm = Q[np.ix_(idx, idx)]
        p = np.diag(Qm).copy()
        Qc = Qm - np.outer(p, p)
        lam, V = psd_eigh(Qc)
        for r in ridges:
            gam = 0.0
            for c, d in zip(positives, ds):
                q1 = float(prior[c])
                dc = d[idx] - (2.0 * q1 - 1.0) * p
                z = min_norm_solve(None, dc, float(r), eig=(lam, V))
                gam += q1 * (1.0 - q1) + quadratic_value(Qc, dc, z)
            df = 1.0 + float(np.sum(lam / (lam + float(r))))
            out.append((int(M), float(r), max(gam, 0.0) / (1.0 - df / n) ** 2 if df < n else float("inf")))
    return out
