"""``marg learn``, ``marg predict`` and ``marg evaluate``: the learner's side and its use at sites."""

from __future__ import annotations

import csv
import io
import time
from pathlib import Path
from typing import Annotated, Any, Optional

from typing import TYPE_CHECKING

import typer

from marg.errors import InputError
from marg._util import atomic_write_bytes

from .common import JsonOpt, OutOpt, emit_json, err, guarded

if TYPE_CHECKING:
    from marg.protocols.bundle import Bundle


def _heavy() -> None:
    """Import the learner stack (numpy, scipy, highspy) on first use, not at ``marg --help``."""
    global np, LEARNERS, Model, estimator_class, evaluate, now_iso, Codebook, encode_file, iter_encoded
    global iter_batches, summary_from_bundles
    import numpy as np
    from marg.learners.model import LEARNERS, Model, estimator_class, evaluate, now_iso
    from marg.marginals.codebook import Codebook
    from marg.marginals.encoding import encode_file, iter_encoded
    from marg.marginals.io import iter_batches
    from marg.protocols.aggregate import summary_from_bundles

ModelArg = Annotated[Path, typer.Argument(help="A model file written by `marg learn`.")]
DataArg = Annotated[Path, typer.Argument(help="A data file (CSV, TSV, .gz, Parquet) coded under the study codebook.")]
SchemaCheck = Annotated[
    Optional[Path], typer.Option("--schema", help="The site's codebook; refused if its fingerprint differs from the model's.")
]


def load_bundles(
    paths: list[Path],
    trust: Path | None = None,
    allow_unsigned: bool = False,
    key: Path | None = None,
    passphrase_file: Path | None = None,
) -> tuple[list[Bundle], list[str]]:
    """Open (if sealed), parse and verify every bundle against the trust store.

    Any failure — altered byte, unknown signer, unsigned without ``--allow-unsigned``,
    sealed to another key — is a one-line refusal naming the file (exit 1).
    """
    from marg.protocols.keys import TrustStore, load_seal_key, read_passphrase_file
    from marg.protocols.signing import load_verified_bundle

    seal_key = None
    if key is not None:
        pw = read_passphrase_file(passphrase_file) if passphrase_file else None
        seal_key = load_seal_key(key, pw)
    store = TrustStore(trust) if trust is not None else None
    bundles = [load_verified_bundle(p, store, allow_unsigned=allow_unsigned, seal_key=seal_key) for p in paths]
    return bundles, [str(p) for p in paths]


def build_estimator(learner: str, *, s: float | None, coverage: float, solver: str, eps: float, n_max: int,
                    k_max: int, ridge: float, features: list[str] | None, callback=None, greedy: bool = False,
                    max_edges: int | None = None, edge_weight: str = "cmi", loss: str = "01",
                    structure: str = "forest"):
    cls = estimator_class(learner)
    if learner == "renyi":
        return cls(ridge=ridge, features=features)
    if learner == "dcc":
        return cls(s=s, coverage=coverage, features=features, greedy=greedy, max_edges=max_edges,
                   edge_weight=edge_weight, loss=loss, structure=structure, callback=callback)
    kw: dict[str, Any] = dict(s=s, coverage=coverage, features=features, solver=solver, eps=eps, n_max=n_max,
                              k_max=k_max, callback=callback)
    return cls(**kw)


def learn_report(learner: str, est: Any, summary, seconds: float) -> dict[str, Any]:
    """The machine-readable result of ``marg learn`` (keys of the CLI contract)."""
    out: dict[str, Any] = {
        "learner": learner,
        "n": summary.n,
        "sites": [s["site"] for s in summary.provenance.get("sites", [])],
        "features": list(getattr(est, "feature_names_", None) or getattr(est, "features_", None) or summary.feature_names),
        "worst_case_error": float(est.worst_case_error_),
        "seconds": seconds,
    }
    if learner in ("mrc", "dcc"):
        out["iterations"] = [float(r) for r in est.iterations_]
        sel = getattr(est, "selected_features_", None)
        if sel is not None:
            out["active_features"] = list(sel)
    if learner == "dcc":
        out["edges"] = [list(e) for e in est.edges_]
    if learner == "renyi":
        out["gamma"] = _scalar_or_list(est.gamma_)
        out["hgr_lower_bound"] = _scalar_or_list(est.hgr_lower_bound_)
        out["separable"] = _scalar_or_list(est.separable_)
        out["certificate_approximate"] = bool(getattr(est, "certificate_approximate_", False))
        out["noise_margin"] = _scalar_or_list(getattr(est, "noise_margin_", 0.0))
    return out


def _scalar_or_list(v: Any) -> Any:
    a = np.asarray(v)
    if a.size == 1:  # binary label: one problem, one number
        return a.reshape(()).item()
    return a.tolist()


def register(app: typer.Typer) -> None:
    @app.command("learn")
    @guarded
    def learn(
        bundles: Annotated[list[Path], typer.Argument(help="Site bundles to aggregate.")],
        learner: Annotated[str, typer.Option("--learner", help="mrc, dcc or renyi.")],
        out: OutOpt,
        json_out: JsonOpt = False,
        s: Annotated[Optional[float], typer.Option("--s", help="Raw λ multiplier (λ = s·std/√n); 0 gives λ = 0. Default: calibrated to --coverage.")] = None,
        coverage: Annotated[float, typer.Option(help="Simultaneous coverage of the confidence box behind the certificate.")] = 0.95,
        solver: Annotated[str, typer.Option(help="MRC LP: cg (column generation) or full.")] = "cg",
        eps: Annotated[float, typer.Option("--eps", help="Column generation: minimum dual violation for a feature to enter.")] = 1e-4,
        n_max: Annotated[int, typer.Option("--n-max", help="Column generation: most features added per iteration.")] = 100,
        k_max: Annotated[int, typer.Option("--k-max", help="Column generation: most iterations.")] = 10,
        ridge: Annotated[float, typer.Option(help="Rényi: ridge on z (the intercept is not shrunk).")] = 0.0,
        greedy: Annotated[bool, typer.Option("--greedy", help="DCC: start first-order and add the edge that lowers R* most, while it does.")] = False,
        max_edges: Annotated[Optional[int], typer.Option("--max-edges", help="DCC: cap on the number of forest edges.")] = None,
        edge_weight: Annotated[str, typer.Option("--edge-weight", help="DCC forest weights: cmi = I(Xi;Xj|Y) (TAN/Chow-Liu), label = I(Xi,Xj;Y).")] = "cmi",
        structure: Annotated[str, typer.Option("--structure", help="DCC edges: forest = spanning forest on --edge-weight (exact); all = every released pair (local-polytope bound R*_L ≥ R*, still a valid certificate; --max-edges keeps the heaviest pairs).")] = "forest",
        loss: Annotated[str, typer.Option("--loss", help="DCC loss: 01 = 0-1 minimax risk (R*), hinge = worst-case hinge loss (binary labels; certificate = worst-case hinge loss = 2R*).")] = "01",
        select: Annotated[str, typer.Option("--select", help="Feature selection before the fit: none, group-lasso or gbd (exact best-M).")] = "none",
        max_features: Annotated[Optional[int], typer.Option("--max-features", help="M: how many features to select (group lasso without it: λ by GCV).")] = None,
        feature_cost: Annotated[Optional[float], typer.Option("--feature-cost", help="gbd: a cost per selected feature instead of --max-features (FSP-λ).")] = None,
        norm: Annotated[str, typer.Option(help="Group-lasso group norm: linf (the paper's L1/L∞) or l2.")] = "linf",
        time_limit: Annotated[float, typer.Option(help="gbd: seconds before stopping with the certified gap reached so far.")] = 60.0,
        trust: Annotated[Optional[Path], typer.Option("--trust", help="Trust store: a folder of SITE.sign.pub files.")] = None,
        allow_unsigned: Annotated[bool, typer.Option("--allow-unsigned", help="Accept unsigned bundles (their site is not authenticated).")] = False,
        key: Annotated[Optional[Path], typer.Option("--key", help="The learner's sealing key (LEARNER.seal.key) to open sealed bundles.")] = None,
        passphrase_file: Annotated[Optional[Path], typer.Option(help="File holding --key's passphrase.")] = None,
    ) -> None:
        """Aggregate site bundles and fit a certified classifier from the summaries alone."""
        _heavy()
        if learner not in LEARNERS:
            raise InputError(f"unknown learner {learner!r} (expected one of {', '.join(LEARNERS)})")
        if not bundles:
            raise InputError("give at least one bundle")
        t0 = time.perf_counter()
        loaded, sources = load_bundles(bundles, trust, allow_unsigned, key, passphrase_file)
        summary = summary_from_bundles(loaded, sources)
        if summary.provenance.get("dropped_tables"):
            dropped = summary.provenance["dropped_tables"]
            err(f"note: {len(dropped)} tables not released by every site are left out (e.g. {dropped[0]})")

        last = {"t": float("-inf")}  # throttled progress: the first record, then every 5 s

        def progress(info: dict) -> None:
            stage = info.get("stage")
            if "R" in info and stage == "cg":
                err(f"  iteration {info.get('k', '?')}: R = {info['R']:.6f}, {info.get('features', '?')} active features")
            elif stage == "greedy":
                a, b = info["edge"]
                err(f"  greedy: edge {info['edges']} {a}–{b}, R = {info['R']:.6f}")
            elif stage == "gbd" and time.perf_counter() - last["t"] >= 5.0:  # GBD iterates fast: every 5 s
                last["t"] = time.perf_counter()
                err(f"  gbd iteration {info['iteration']}: best {info['upper']:.6g}, bound {info['lower']:.6g}, "
                    f"gap {info['gap']:.3g} ({info['seconds']:.0f} s of --time-limit {time_limit:g})")

        selection = None
        if select not in ("none", "group-lasso", "gbd"):
            raise InputError(f"unknown --select {select!r} (expected none, group-lasso or gbd)")
        if select != "none":
            from marg.learners.selection import select_features

            if select == "gbd" and max_features is None and feature_cost is None:
                raise InputError("--select gbd needs --max-features M or --feature-cost C")
            if max_features is not None and max_features < 1:
                raise InputError(f"--max-features must be at least 1, got {max_features}")
            selection = select_features(
                summary, method=select, max_features=max_features, norm=norm, feature_cost=feature_cost,
                time_limit=time_limit, callback=progress,
            )
            if not selection.selected:
                raise InputError(f"{select} selected no feature (the label looks independent of every feature)")
            gap = f", certified gap {selection.gap:.3g}" if selection.gap is not None else ""
            err(f"{select}: selected {len(selection.selected)} features ({selection.status}{gap}): {', '.join(selection.selected)}")
        features = selection.selected if selection is not None else None
        est = build_estimator(learner, s=s, coverage=coverage, solver=solver, eps=eps, n_max=n_max, k_max=k_max,
                              ridge=ridge, features=features, callback=progress, greedy=greedy, max_edges=max_edges,
                              edge_weight=edge_weight, loss=loss, structure=structure)
        if learner == "dcc" and structure == "all":
            err("solving the local-polytope LP over every released pair (can take a while with many features)")
        est.fit(summary)
        seconds = time.perf_counter() - t0
        rep = learn_report(learner, est, summary, seconds)
        if selection is not None:
            rep["features"] = list(selection.selected)
            rep["selected"] = list(selection.selected)
            rep["selection"] = {"method": select, "status": selection.status, "objective": selection.objective,
                                "lambda": selection.lam}
            if select == "gbd":
                rep["gap"] = selection.gap
                rep["selection"].update(lower_bound=selection.lower_bound, upper_bound=selection.upper_bound)
        model = Model(
            learner=learner,
            codebook=summary.codebook,
            estimator=est,
            info={
                "created": now_iso(),
                "n": summary.n,
                "sites": summary.provenance.get("sites", []),
                "params": {"s": s, "coverage": coverage, "solver": solver, "eps": eps, "n_max": n_max, "k_max": k_max,
                           "ridge": ridge, "greedy": greedy, "max_edges": max_edges, "edge_weight": edge_weight, "loss": loss, "structure": structure, "select": select, "max_features": max_features, "feature_cost": feature_cost},
                "report": {k: v for k, v in rep.items() if k != "seconds"},
            },
        )
        model.save(out)
        if json_out:
            emit_json(rep)
            return
        typer.echo(
            f"{learner} model from {len(loaded)} site(s), n = {summary.n:,.0f}, {len(rep['features'])} features → {out}"
        )
        typer.echo(f"certificate: worst-case error ≤ {rep['worst_case_error']:.4f} {_certificate_words(learner, coverage, s)}")
        K = len(summary.codebook.label.classes)
        if learner in ("mrc", "dcc") and loss == "01" and rep["worst_case_error"] >= 1.0 - 1.0 / K - 1e-9:
            hint = "select features (--select)" + (", release fewer pair tables (export --pairs)" if learner == "dcc" else "") + (
                " or lower --coverage") + ("" if s is not None else ", or use --s for an uncalibrated model")
            err(f"warning: the certificate is trivial (R* = {rep['worst_case_error']:.4f} = 1 − 1/{K}, what guessing "
                f"uniformly achieves): {summary.n:,.0f} rows are too few for {coverage:.0%} coverage over this many "
                f"table entries, so the model guarantees no more than a coin; {hint}")
        if rep.get("certificate_approximate"):
            err("note: the bundles carry DP noise; the Rényi certificate 2γ is computed on the post-processed summary "
                "and widened by a noise margin (normal approximation), so it is approximate")
        if learner == "renyi":
            typer.echo(f"γ = {rep['gamma']}, HGR lower bound {rep['hgr_lower_bound']}, separable: {rep['separable']}")
        if learner == "dcc":
            kind = "graph (local-polytope bound)" if getattr(est, "relaxed_", False) else "forest"
            typer.echo(f"{kind}: {len(rep['edges'])} edges: " + ", ".join(f"{a}–{b}" for a, b in rep["edges"]))
        if learner == "mrc" and solver == "cg" and rep.get("active_features") is not None:
            act = rep["active_features"]
            shown = ", ".join(act[:10]) + (f", … ({len(act) - 10} more)" if len(act) > 10 else "")
            typer.echo(f"column generation: {len(act)} features in the final working set: {shown}")
        if learner in ("mrc", "dcc") and len(rep["iterations"]) > 1:
            typer.echo("R^k: " + ", ".join(f"{r:.4f}" for r in rep["iterations"]))
        typer.echo(f"fitted in {seconds:.2f} s")

    @app.command("request")
    @guarded
    def request_cmd(
        bundles: Annotated[list[Path], typer.Argument(help="Round-1 bundles (first-order tables).")],
        top: Annotated[int, typer.Option("--top", help="How many features to keep (by mutual information with the label).")],
        out: OutOpt,
        trust: Annotated[Optional[Path], typer.Option("--trust", help="Trust store: a folder of SITE.sign.pub files.")] = None,
        allow_unsigned: Annotated[bool, typer.Option("--allow-unsigned", help="Accept unsigned bundles.")] = False,
        key: Annotated[Optional[Path], typer.Option("--key", help="The learner's sealing key, to open sealed bundles.")] = None,
        json_out: JsonOpt = False,
    ) -> None:
        """Two-round protocol, round 2: screen the top features from round-1 bundles and write
        the pair request the sites answer with `marg export --pairs @REQUEST.json`."""
        _heavy()
        from itertools import combinations

        from marg.marginals.request import screen_features, write_request

        loaded, sources = load_bundles(bundles, trust, allow_unsigned, key)
        summary = summary_from_bundles(loaded, sources)
        if top < 2:
            raise InputError(f"--top must be at least 2 (a pair needs two features), got {top}")
        lab = summary.codebook.label.name
        first = [t for t in summary.tables if t.kind == "counts" and len(t.clique) <= 2 and lab in t.clique]
        names = screen_features(first, top, label=lab)
        pairs = list(combinations(sorted(names, key=summary.codebook.index), 2))
        write_request(out, summary.fingerprint, pairs, features=names)
        if json_out:
            emit_json({"features": names, "pairs": [list(p) for p in pairs], "out": str(out)})
            return
        typer.echo(f"wrote {out}: {len(names)} screened features, {len(pairs)} pair tables requested")
        typer.echo(f"features: {', '.join(names)}")
        typer.echo(f"sites answer with: marg export DATA --schema SCHEMA --site NAME --pairs @{out} ...")

    @app.command("predict")
    @guarded
    def predict(
        model: ModelArg,
        data: DataArg,
        out: OutOpt,
        schema: SchemaCheck = None,
        id_column: Annotated[Optional[str], typer.Option("--id", help="A column to copy into the output (e.g. a patient id).")] = None,
        flag_outside: Annotated[bool, typer.Option("--flag-outside", help="Add a column 'outside' (1/0): the row is outside the model's uncertainty set, so its certificate does not cover it (mrc/dcc models).")] = False,
    ) -> None:
        """Write class probabilities and the predicted label for every row of DATA."""
        _heavy()
        m = Model.load(model)
        if schema is not None:
            m.check_codebook(Codebook.load(schema))
        if flag_outside and not hasattr(m.estimator, "outside"):
            raise InputError(f"--flag-outside needs an mrc or dcc model; {model} is a {m.learner} model (it records no ruled-out cells)")
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        head = ([id_column] if id_column else []) + [f"p_{c}" for c in m.classes] + ["predicted"] + (["outside"] if flag_outside else [])
        w.writerow(head)
        ids = iter_batches(data, [id_column]) if id_column else None
        n = n_out = 0
        for enc in iter_encoded(data, m.codebook, with_label=False):
            proba = m.predict_proba(enc.X)
            pred = m.predict(enc.X)
            outside = m.outside(enc.X) if flag_outside else None
            idv = next(ids)[id_column].to_pylist() if ids is not None else None
            for r in range(enc.n):
                row = ([idv[r]] if idv is not None else []) + [f"{p:.6g}" for p in proba[r]] + [m.classes[int(pred[r])]]
                if outside is not None:
                    row.append(int(outside[r]))
                w.writerow(row)
            n += enc.n
            n_out += int(outside.sum()) if outside is not None else 0
        atomic_write_bytes(Path(out), buf.getvalue().encode("utf-8"))
        typer.echo(f"wrote {out}: {n:,} predictions ({m.learner} model, classes {', '.join(m.classes)})")
        if flag_outside:
            typer.echo(f"{n_out:,} of {n:,} rows are outside the model's uncertainty set (column 'outside' = 1)")

    @app.command("evaluate")
    @guarded
    def evaluate_cmd(model: ModelArg, data: DataArg, json_out: JsonOpt = False, schema: SchemaCheck = None) -> None:
        """Accuracy and error of a model on labelled data, next to its certificate."""
        _heavy()
        m = Model.load(model)
        if schema is not None:
            m.check_codebook(Codebook.load(schema))
        enc = encode_file(data, m.codebook, with_label=True)
        rep = evaluate(m, enc.X, enc.y)
        if json_out:
            emit_json({k: rep[k] for k in ("n", "accuracy", "error", "worst_case_error", "randomized_error", "confusion",
                                           "outside", "outside_error")})
            return
        typer.echo(f"{m.learner} model on {rep['n']:,} rows of {data}:")
        typer.echo(f"  accuracy {rep['accuracy']:.4f}, error {rep['error']:.4f} (randomized rule: {rep['randomized_error']:.4f})")
        typer.echo(f"  certificate (worst-case error bound): {rep['worst_case_error']:.4f}")
        if rep["outside"]:
            typer.echo(f"  {rep['outside']:,} rows ({rep['outside'] / rep['n']:.1%}) are outside the uncertainty set (every label "
                       f"crosses a cell the released tables rule out): the certificate does not cover them; error there "
                       f"{rep['outside_error']:.4f}")
        classes = rep["classes"]
        width = max(8, *(len(c) for c in classes))
        typer.echo("  confusion matrix (rows: true, columns: predicted)")
        typer.echo("  " + " " * width + "".join(f"{c:>{width + 2}}" for c in classes))
        for c, row in zip(classes, rep["confusion"]):
            typer.echo(f"  {c:<{width}}" + "".join(f"{v:>{width + 2}}" for v in row))


def _certificate_words(learner: str, coverage: float, s: float | None) -> str:
    if learner == "renyi":
        return "(2γ: for distributions with the released pairwise marginals; no sampling margin)"
    if s is None:
        return f"(holds with probability ≥ {coverage:.0%} over the sample)"
    return f"(λ = {s:g}·std/√n; not calibrated to a coverage level)"
