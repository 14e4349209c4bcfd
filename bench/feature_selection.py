"""Feature selection from summaries: group lasso vs exact GBD vs a mutual-information filter.

Run: python bench/feature_selection.py [--time-limit 120] [--g 100] [--genes 300] [--sets
kr-vs-kp,promoters,colon,ALLAML]

UCI sets (kr-vs-kp: 36 features, promoters: 57): one random 70/30 split (seed 0). The
codebook lists every PMLB code of each column as a level (a public fact of the encoding).
The learner side sees ``Summary.from_rows(train, stats="all")`` only. For M = 3, 5, 10:

- ``GL-Linf`` / ``GL-L2``: :func:`learners.selection.select_features` group lasso (the
  paper's L1/L∞ and L1/L2) with ``max_features=M``;
- ``GBD``: exact best-M on c_g (ridge 1/g), warm-started from the L1/L∞ path, with a time
  limit; reports lower/upper bound, gap and status;
- ``MI``: top-M features by I(X_i; Y) computed from the summary's first-order tables.

Columns: c₀(S) = min over z on S of zᵀQ_cz − d_cᵀz (the restricted Rényi objective, lower is
better; γ(S) = q(1−q) + c₀), c_g(S) (GBD's ridge objective), the refit Rényi classifier's
certificate 2γ(S) and its test error (MAP rule) on the 30%, selection time.

Gene-expression sets (colon 62×2000 raw intensities, ALLAML 72×7129): each gene is cut at
its training-split terciles into 3 levels (data-derived edges: acceptable for a benchmark,
not for a real release). A first-order Summary over all genes ranks genes by the
group-lasso entry statistic ‖d_{c,i}‖₁ (the λ at which gene i would enter an empty model);
the top ``--genes`` genes get an all-pairs Summary (the current Summary's table lookup is
linear in the number of tables, so all-pairs summaries over thousands of genes are out of
reach). On those we time the L1/L∞ path and run GBD (M = 5, 10) to the time limit.
"""

from __future__ import annotations

import argparse
import io
import os
import platform
import sys
import time
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from marg.learners.features.quadratic import discrete_blocks  # noqa: E402
from marg.learners.selection.group_lasso import group_lasso_path  # noqa: E402
from marg.learners.classifiers.renyi import RenyiClassifier  # noqa: E402
from marg.learners.selection.select import SelectionProblem, select_features, selection_problem  # noqa: E402
from marg.marginals.data.codebook import CategoricalFeature, Codebook, Label  # noqa: E402
from marg.marginals.summary import Summary  # noqa: E402

DATA = Path(os.environ.get("MARG_DATASETS", ROOT.parent / "shared" / "datasets"))
PLOTS = ROOT / "bench" / "plots"
UCI = {
    "kr-vs-kp": "kr-vs-kp/kr-vs-kp.tsv.gz",
    "promoters": "molecular_biology_promoters/molecular_biology_promoters.tsv.gz",
}

def split(n: int, seed: int = 0, frac: float = 0.7) -> tuple[np.ndarray, np.ndarray]:
    perm = np.random.default_rng(seed).permutation(n)
    k = int(round(frac * n))
    return perm[:k], perm[k:]


def load_uci(name: str):
    df = pd.read_csv(DATA / UCI[name], sep="\t")
    y = df["target"].to_numpy().astype(int)
    Xdf = df.drop(columns="target")
    feats, cols = [], []
    for c in Xdf.columns:
        levels = sorted(Xdf[c].unique().tolist())
        feats.append(CategoricalFeature(str(c), tuple(str(v) for v in levels)))
        cols.append(np.searchsorted(levels, Xdf[c].to_numpy()))
    cb = Codebook(features=tuple(feats), label=Label("target", ("0", "1")))
    return cb, np.column_stack(cols).astype(float), y


def load_genes(name: str):
    if name == "colon":
        with zipfile.ZipFile(DATA / "colon" / "colon.csv.zip") as z:
            member = next(n for n in z.namelist() if not n.startswith("__MACOSX"))
            df = pd.read_csv(io.BytesIO(z.read(member)), header=None)
        X = df.iloc[:, :-1].to_numpy(dtype=float)
        y = (df.iloc[:, -1].to_numpy() == "Normal").astype(int)
        classes = ("Tumor", "Normal")
    else:
        import scipy.io as sio

        m = sio.loadmat(DATA / "ALLAML" / "ALLAML.mat")
        X = np.asarray(m["X"], dtype=float)
        y = (m["Y"].ravel() == 2).astype(int)
        classes = ("ALL", "AML")
    return X, y, classes


def terciles(Xtr: np.ndarray, X: np.ndarray) -> np.ndarray:
    """Per-gene codes 0/1/2 at the training terciles."""
    q = np.quantile(Xtr, [1 / 3, 2 / 3], axis=0)
    return ((X > q[0]).astype(int) + (X > q[1]).astype(int)).astype(float)


def gene_codebook(names, classes):
    return Codebook(
        features=tuple(CategoricalFeature(nm, ("low", "mid", "high")) for nm in names),
        label=Label("y", classes),
    )


def problem_from_tables(S: Summary) -> SelectionProblem:
    """The SelectionProblem of an exact all-pairs Summary, assembled from its tables.

    Same numbers as :func:`learners.selection.selection_problem` (checked in ``gene_rows``)
    but O(#tables): :func:`marg.learners.features.quadratic.second_moments` looks every pair up by a linear scan over
    all tables, which is O(p⁴) and out of reach beyond ~100 features.
    """
    assert not S.is_noisy
    lab = S.codebook.label.name
    blocks = discrete_blocks(S.codebook)
    M = sum(b.size for b in blocks)
    Q = np.zeros((M, M))
    d = np.zeros(M)
    pos = {b.name: b for b in blocks}
    for t in S.tables:
        if t.kind != "counts":
            continue
        c = t.clique
        if len(c) == 2 and c[1] == lab:
            b = pos[c[0]]
            P = t.counts / S.n
            Q[b.slice, b.slice] = np.diag(P.sum(axis=1))
            d[b.slice] = P[:, 1] - P[:, 0]
        elif len(c) == 3 and c[2] == lab:
            bi, bj = pos[c[0]], pos[c[1]]
            P = t.counts.sum(axis=2) / S.n
            Q[bi.slice, bj.slice] = P
            Q[bj.slice, bi.slice] = P.T
    p = np.diag(Q).copy()
    q1 = float(S.prior[1])
    return SelectionProblem(Qc=Q - np.outer(p, p), Dc=(d - (2 * q1 - 1) * p)[:, None],
                            sizes=[b.size for b in blocks], names=[b.name for b in blocks],
                            const=q1 * (1 - q1), n=float(S.n))


def mutual_information_rank(S: Summary) -> list[str]:
    """Features by I(X_i; Y) from the first-order tables N[x_i, y] (descending)."""
    lab = S.codebook.label.name
    mi = []
    for nm in S.codebook.feature_names:
        P = S.joint((nm, lab))
        px, py = P.sum(axis=1, keepdims=True), P.sum(axis=0, keepdims=True)
        with np.errstate(divide="ignore", invalid="ignore"):
            t = np.where(P > 0, P * np.log(P / (px * py)), 0.0)
        mi.append(float(t.sum()))
    order = np.argsort(mi)[::-1]
    return [S.codebook.feature_names[i] for i in order]


def refit_error(S: Summary, feats: list[str], Xte: np.ndarray, yte: np.ndarray) -> tuple[float, float]:
    m = RenyiClassifier(features=feats).fit(S)
    return float(np.mean(m.predict(Xte) != yte)), float(m.worst_case_error_)


def uci_rows(name: str, Ms, time_limit: float, gs: list[float], log) -> tuple[list[dict], object]:
    cb, X, y = load_uci(name)
    tr, te = split(len(y))
    t = time.perf_counter()
    S = Summary.from_rows(cb, X[tr], y[tr], stats="all")
    P = selection_problem(S)
    setup = time.perf_counter() - t
    log(f"{name}: n_train={len(tr)} p={len(P.sizes)} M_cols={P.Qc.shape[0]} summary+Q {setup:.1f}s")
    mi = mutual_information_rank(S)
    rows = []
    for M in Ms:
        cand = {}
        for norm, label in (("linf", "GL-Linf"), ("l2", "GL-L2")):
            r = select_features(S, "group-lasso", M, norm=norm, problem=P)
            cand[label] = (r.selected, r.seconds, {"lam": r.lam})
        for g in gs:
            r = select_features(S, "gbd", M, problem=P, g=g, time_limit=time_limit)
            cand[f"GBD g={g:g}"] = (r.selected, r.seconds, {
                "g": g, "lower": r.lower_bound, "upper": r.upper_bound, "gap": r.gap, "status": r.status,
                "iters": len([h for h in r.path if h["stage"] == "gbd"])})
        t = time.perf_counter()
        sel = sorted(mi[:M], key=cb.index)
        cand["MI"] = (sel, time.perf_counter() - t, {})
        for method, (sel, secs, extra) in cand.items():
            idx = [P.names.index(nm) for nm in sel]
            err, cert = refit_error(S, sel, X[te], y[te])
            row = {"dataset": name, "M": M, "method": method, "k": len(sel), "c0": P.objective(idx),
                   "cg": P.objective(idx, gs[0]), "cert": cert, "test_error": err, "seconds": secs,
                   "selected": sel, **extra}
            rows.append(row)
            log(f"  M={M:2d} {method:12s} k={len(sel):2d} c0={row['c0']:.5f} c_g0={row['cg']:.5f} "
                f"err={100 * err:5.2f}% 2γ={cert:.3f} {secs:7.2f}s {extra if 'GBD' in method else ''} {sel}")
    return rows, (S, P)


def gene_rows(name: str, Ms, n_genes: int, time_limit: float, gs: list[float], log) -> list[dict]:
    Xraw, y, classes = load_genes(name)
    tr, te = split(len(y))
    X = terciles(Xraw[tr], Xraw)
    names = [f"g{j}" for j in range(X.shape[1])]
    t = time.perf_counter()
    S1 = Summary.from_rows(gene_codebook(names, classes), X[tr], y[tr], stats="first")
    lab = S1.codebook.label.name
    q1 = S1.prior[1]
    stat = []
    for nm in names:
        Pxy = S1.joint((nm, lab))
        dc = (Pxy[:, 1] - Pxy[:, 0]) - (2 * q1 - 1) * Pxy.sum(axis=1)
        stat.append(np.abs(dc).sum())
    top = sorted(np.argsort(stat)[::-1][:n_genes])
    screen = time.perf_counter() - t
    keep = [names[j] for j in top]
    t = time.perf_counter()
    S = Summary.from_rows(gene_codebook(keep, classes), X[tr][:, top], y[tr], stats="all")
    P = problem_from_tables(S)
    setup = time.perf_counter() - t
    # the table-assembled problem equals selection_problem(summary) (checked on 30 genes)
    S30 = S.restrict(keep[:30])
    ref, mine = selection_problem(S30), problem_from_tables(S30)
    assert np.allclose(ref.Qc, mine.Qc, atol=1e-14) and np.allclose(ref.Dc, mine.Dc, atol=1e-14)
    log(f"{name}: n_train={len(tr)} genes={X.shape[1]} screened to {len(keep)} ({screen:.1f}s); "
        f"all-pairs summary + Q over {P.Qc.shape[0]} columns {setup:.1f}s")
    t = time.perf_counter()
    path = group_lasso_path(P.Qc, P.Dc, P.sizes, n_lambdas=50, lambda_min_ratio=1e-2, norm="linf", tol=1e-7)
    path_s = time.perf_counter() - t
    log(f"  L1/Linf path: {len(path)} lambdas, {path_s:.2f}s, support sizes {[len(p.active) for p in path[::7]]}")
    rows = [{"dataset": name, "genes": X.shape[1], "screened": len(keep), "method": "GL-Linf path",
             "lambdas": len(path), "seconds": path_s, "final_support": len(path[-1].active)}]
    Xte = X[te][:, top]
    for M in Ms:
        r = select_features(S, "group-lasso", M, problem=P, tol=1e-7)
        err, cert = refit_error(S, r.selected, Xte, y[te])
        rows.append({"dataset": name, "M": M, "method": "GL-Linf", "k": len(r.selected), "c0": r.objective,
                     "cg": P.objective([P.names.index(s) for s in r.selected], gs[0]), "test_error": err,
                     "cert": cert, "seconds": r.seconds})
        for g in gs:
            r = select_features(S, "gbd", M, problem=P, g=g, time_limit=time_limit, tol=1e-7)
            err, cert = refit_error(S, r.selected, Xte, y[te])
            rows.append({"dataset": name, "M": M, "method": f"GBD g={g:g}", "k": len(r.selected),
                         "c0": r.objective, "cg": P.objective([P.names.index(s) for s in r.selected], gs[0]),
                         "test_error": err, "cert": cert, "seconds": r.seconds, "g": g,
                         "lower": r.lower_bound, "upper": r.upper_bound, "gap": r.gap, "status": r.status,
                         "iters": len([h for h in r.path if h["stage"] == "gbd"])})
        for row in rows[-1 - len(gs):]:
            log(f"  M={M:2d} {row['method']:12s} k={row['k']:2d} c0={row['c0']:.5f} c_g0={row['cg']:.5f} "
                f"err={100 * row['test_error']:5.2f}% {row['seconds']:7.2f}s "
                + (f"gap={row['gap']:.2e} ({row['gap'] / max(abs(row['upper']), 1e-12):.1%}) {row['status']} "
                   f"iters={row['iters']}"
                   if "GBD" in row["method"] else ""))
    return rows


def plot_path(S: Summary, P, out: Path, name: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, norm, title in ((axes[0], "linf", "L1/L∞ (seed 004, h(|z|))"), (axes[1], "l2", "L1/L2")):
        path = group_lasso_path(P.Qc, P.Dc, P.sizes, n_lambdas=60, lambda_min_ratio=1e-3, norm=norm)
        lam = np.array([pt.lam for pt in path])
        norms = np.array([pt.group_norms for pt in path])
        order = []
        for pt in path:
            order += [i for i in pt.active if i not in order]
        for rank, i in enumerate(order):
            ax.plot(lam, norms[:, i], lw=1.4 if rank < 8 else 0.6, alpha=1.0 if rank < 8 else 0.5,
                    label=P.names[i] if rank < 8 else None)
        ax.set_xscale("log")
        ax.invert_xaxis()
        ax.set_xlabel("λ (decreasing →)")
        ax.set_ylabel("group norm ‖z_i‖")
        ax.set_title(f"{name}: {title}")
        ax.legend(fontsize=7, title="first 8 to enter", title_fontsize=7)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)


def fmt_table(rows: list[dict]) -> str:
    out = ["| dataset | M | method | k | c₀(S) | c_g(S), g = first --g | refit 2γ | refit test error % | time (s) | "
           "GBD bounds on its own c_g [lower, upper], gap, status |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "M" not in r:
            continue
        gb = ""
        if "GBD" in r["method"]:
            rel = r["gap"] / max(abs(r["upper"]), 1e-12)
            gb = f"[{r['lower']:.5f}, {r['upper']:.5f}], {r['gap']:.1e} ({rel:.2%}), {r['status']}, {r['iters']} it"
        out.append(f"| {r['dataset']} | {r['M']} | {r['method']} | {r['k']} | {r['c0']:.5f} | {r['cg']:.5f} | "
                   f"{r['cert']:.3f} | {100 * r['test_error']:.2f} | {r['seconds']:.2f} | {gb} |")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sets", default="kr-vs-kp,promoters,colon,ALLAML")
    ap.add_argument("--time-limit", type=float, default=120.0, help="GBD wall-clock limit per run (s)")
    ap.add_argument("--g", default="100,20", help="GBD ridge parameter(s), comma-separated")
    ap.add_argument("--genes", type=int, default=500, help="genes kept by first-order screening")
    ap.add_argument("--M", default="3,5,10")
    args = ap.parse_args()
    Ms = [int(m) for m in args.M.split(",")]
    gs = [float(v) for v in args.g.split(",")]
    sets = args.sets.split(",")

    def log(msg: str) -> None:
        print(msg, flush=True)

    log(f"# bench/feature_selection.py  python {platform.python_version()}  numpy {np.__version__}  "
        f"time limit {args.time_limit}s  g={gs}")
    rows: list[dict] = []
    for name in sets:
        if name in UCI:
            r, (S, P) = uci_rows(name, Ms, args.time_limit, gs, log)
            rows += r
            if name == "kr-vs-kp":
                plot_path(S, P, PLOTS / "group_lasso_path.png", name)
                log(f"  wrote {PLOTS / 'group_lasso_path.png'}")
        else:
            rows += gene_rows(name, [m for m in Ms if m >= 5] or Ms, args.genes, args.time_limit, gs, log)
    log("")
    log(fmt_table(rows))
    for r in rows:
        if r.get("method") == "GL-Linf path":
            log(f"\n{r['dataset']}: {r['genes']} genes screened to {r['screened']}; L1/L∞ path over "
                f"{r['lambdas']} λ values in {r['seconds']:.2f}s (final support {r['final_support']} genes)")


if __name__ == "__main__":
    main()
