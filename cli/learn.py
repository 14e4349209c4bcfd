"""``marg learn``, ``marg certify``, ``marg request``, ``marg predict`` and ``marg evaluate``: the learner's side and
its use at sites.

Commands parse options, call the library (:mod:`marg.learners.learn`, :mod:`marg.api`) and print; the library does the
work.
"""


import inspect
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from .app import app
from .common import JsonOpt, OutOpt, SchemaOpt, emit_json, err
from .progress import CountProgress, LearnProgress

ModelArg = Annotated[Path, typer.Argument(help="A model file written by `marg learn`.")]
DataArg = Annotated[str, typer.Argument(help="A data file (CSV, TSV, .gz, Parquet) coded under the study codebook, or "
                                             "an OMOP CDM (omop+duckdb://site.duckdb?cdm=main, "
                                             "omop+postgresql://…?cdm=…&results=…).")]
SchemaCheck = Annotated[
    Optional[Path], typer.Option("--schema", help="This site's codebook (required unless --allow-unsigned): a model "
                                                  "of another codebook is refused.")
]
TrustOpt = Annotated[Optional[Path], typer.Option("--trust", help="Trust store: a folder of SITE.sign.pub files.")]
UnsignedOpt = Annotated[bool, typer.Option("--allow-unsigned",
                                           help="Accept unsigned bundles (their site is not authenticated).")]
SealKeyOpt = Annotated[Optional[Path], typer.Option("--key", help="The learner's sealing key (LEARNER.seal.key) to "
                                                                  "open sealed bundles.")]
PassphraseOpt = Annotated[Optional[Path], typer.Option(help="File holding --key's passphrase.")]
SignKeyOpt = Annotated[Optional[Path], typer.Option("--sign-key",
                                                    help="The learner's signing key (LEARNER.sign.key) to sign the "
                                                         "model, so sites accept it. Default: $MARG_SIGN_KEY, else "
                                                         "the key in $MARG_HOME/keys.")]
NoSignOpt = Annotated[bool, typer.Option("--no-sign",
                                         help="Write an unsigned model (sites refuse it unless --allow-unsigned).")]
SignPassOpt = Annotated[Optional[Path], typer.Option("--sign-passphrase-file",
                                                     help="File holding --sign-key's passphrase.")]
ModelTrustOpt = Annotated[Optional[Path], typer.Option("--trust",
                                                       help="Trust store of the learner's key (a folder of "
                                                            "NAME.sign.pub files): the model's signature is verified "
                                                            "against it.")]
ModelUnsignedOpt = Annotated[bool, typer.Option("--allow-unsigned", help="Accept an unsigned model (for experiments: "
                                                                         "nobody vouches for it).")]


LEDGER_PANEL = "The sites' ledgers (forks, unrecorded releases)"
HistoryOpt = Annotated[Optional[Path], typer.Option("--history",
                                                    help="The learner's record of every site's ledger positions "
                                                         "received (default $MARG_HOME/learner-history.json): a "
                                                         "bundle that forks it is refused.",
                                                    rich_help_panel=LEDGER_PANEL)]
SiteLedgerOpt = Annotated[Optional[list[Path]], typer.Option("--site-ledger",
                                                             help="A site's ledger file (its ledger.jsonl, or "
                                                                  "consecutive lines of it; repeatable): its signed "
                                                                  "entries show the releases between the positions "
                                                                  "the history holds and a newer bundle, which is "
                                                                  "refused without them.",
                                                             rich_help_panel=LEDGER_PANEL)]
UnledgeredOpt = Annotated[bool, typer.Option("--allow-unledgered",
                                             help="Accept signed bundles recorded in no site ledger (exported with "
                                                  "--no-ledger: on no privacy budget).", rich_help_panel=LEDGER_PANEL)]


def _history(path: Path | None, allow_unledgered: bool, site_ledgers: list[Path] | None = None,
             trust: Path | None = None):
    """The learner's history of site ledgers (:mod:`marg.protocols.history`), holding the signed
    entries of ``site_ledgers`` (checked under ``trust``)."""
    from marg.protocols.history import History, default_history_path

    h = History(path if path is not None else default_history_path(), allow_unledgered=allow_unledgered)
    if site_ledgers:
        from marg.protocols.shown_ledger import read_shown_ledger
        from marg.protocols.trust_store import TrustStore

        if trust is None:
            from marg.errors import InputError

            raise InputError("--site-ledger needs --trust: its lines are checked under the site's key")
        store = TrustStore(trust)
        for f in site_ledgers:
            h.show(read_shown_ledger(f, store))
    return h


def _signer(sign_key: Path | None, passphrase_file: Path | None, no_sign: bool) -> tuple[Any, str] | None:
    """The key that will sign the model, loaded before any work (a wrong passphrase fails first):
    ``--sign-key``, else the configured one (:func:`marg.protocols.site.default_signing_key`);
    None with ``--no-sign`` or when no key is configured."""
    from marg.protocols.keys import load_signing_key, read_passphrase_file
    from marg.protocols.site import default_signing_key

    if no_sign:
        if sign_key is not None:
            from marg.errors import InputError

            raise InputError("--sign-key and --no-sign contradict each other")
        return None
    path = sign_key if sign_key is not None else default_signing_key()
    if path is None:
        return None
    pw = read_passphrase_file(passphrase_file) if passphrase_file else None
    return load_signing_key(path, pw), path.name.split(".")[0]


def _sign(out: Path, signer: tuple[Any, str] | None, quiet: bool = False) -> str:
    """Sign the model file ``out`` with ``signer``; the words to print. An unsigned model is said in one line."""
    if signer is None:
        if not quiet:
            err(f"note: {out} is unsigned: sites refuse it (predict, evaluate and report need --allow-unsigned); sign "
                "it with --sign-key LEARNER.sign.key, or keep the learner's key in $MARG_HOME/keys (or $MARG_SIGN_KEY)")
        return "unsigned"
    from marg.protocols.model_signing import sign_model_file

    key, name = signer
    kid = sign_model_file(out, key, name)
    return f"signed by {name} ({kid[:12]}…)"


def _verified_model(model: Path, trust: Path | None, allow_unsigned: bool, schema: Path | None):
    """(the model, who signed it) after its signature checks out (refusals exit 1), checked against ``schema``."""
    from marg import api

    m, signer, _ = api.load_verified_model(model, schema, trust, allow_unsigned)  # read once; a refusal exits 1 first
    if schema is None and not allow_unsigned:
        from marg.errors import InputError

        raise InputError(f"{model}: give this site's codebook (--schema): a model fitted under another study's "
                         "codebook would predict silently wrong")
    return m, signer


def _signed_words(signer: str | None) -> str:
    """Who vouches for the model, in the words ``predict`` and ``evaluate`` print."""
    return (f"signed by {signer!r} (a learner's key in the trust store)" if signer else
            "UNSIGNED (accepted with --allow-unsigned: nobody vouches for it)")



@app.command("learn")
def learn(
    bundles: Annotated[list[Path], typer.Argument(help="Site bundles to aggregate.")],
    out: OutOpt,
    learner: Annotated[str, typer.Option("--learner",
                                         help="auto (default: estimates each candidate's error — leave-one-site-out "
                                              "with 2-20 sites — and computes its certificate, then chooses by "
                                              "--prefer), mrc, dcc, renyi, nb, boost or prior (the label-only rule: "
                                              "one class for every row, certified by the label table "
                                              "alone).")] = "auto",
    prefer: Annotated[Optional[str], typer.Option("--prefer",
                                                  help="auto: accuracy (the default: the smallest estimated error; "
                                                       "the larger class only when estimated better beyond the noise; "
                                                       "the chosen model's own certificate) or certificate (the "
                                                       "smallest non-trivial certificate among candidates whose "
                                                       "estimated error is within noise of the best; balanced is its "
                                                       "former name).",
                                                  rich_help_panel="Automatic choice (--learner auto)")] = None,
    json_out: JsonOpt = False,
    s: Annotated[Optional[float], typer.Option("--s",
                                               help="mrc/dcc: raw λ multiplier (λ = s·std/√n); 0 gives λ = 0. "
                                                    "Default: calibrated to --coverage.",
                                               rich_help_panel="MRC and DCC")] = None,
    coverage: Annotated[float, typer.Option(help="Simultaneous coverage of the confidence box behind the "
                                                 "certificate.")] = 0.95,
    solver: Annotated[str, typer.Option(help="mrc LP: cg (column generation) or full.",
                                        rich_help_panel="MRC (--learner mrc)")] = "cg",
    eps: Annotated[float, typer.Option("--eps", help="mrc column generation: minimum dual violation for a feature to "
                                                     "enter.", rich_help_panel="MRC (--learner mrc)")] = 1e-4,
    n_max: Annotated[int, typer.Option("--n-max", help="mrc column generation: most features added per iteration.",
                                       rich_help_panel="MRC (--learner mrc)")] = 100,
    k_max: Annotated[int, typer.Option("--k-max", help="mrc column generation: most iterations.",
                                       rich_help_panel="MRC (--learner mrc)")] = 10,
    ridge: Annotated[Optional[float], typer.Option(help="renyi: ridge on z (the intercept is not shrunk). Default: 0 "
                                                        "on exact summaries, set from the recorded noise under DP.",
                                                   rich_help_panel="Rényi (--learner renyi)")] = None,
    alpha: Annotated[float, typer.Option(help="nb: pseudo-count per cell of the naive-Bayes tables.",
                                         rich_help_panel="Naive Bayes (--learner nb)")] = 0.5,
    greedy: Annotated[bool, typer.Option("--greedy",
                                         help="dcc: start first-order and add the edge that lowers R* most, while it "
                                              "does.", rich_help_panel="DCC (--learner dcc)")] = False,
    max_edges: Annotated[Optional[int], typer.Option("--max-edges", help="dcc: cap on the number of forest edges.",
                                                     rich_help_panel="DCC (--learner dcc)")] = None,
    edge_weight: Annotated[str, typer.Option("--edge-weight",
                                             help="dcc forest weights: cmi = I(Xi;Xj|Y) (TAN/Chow-Liu), label = "
                                                  "I(Xi,Xj;Y).", rich_help_panel="DCC (--learner dcc)")] = "cmi",
    structure: Annotated[str, typer.Option("--structure",
                                           help="dcc edges: forest = spanning forest on --edge-weight (exact); all = "
                                                "every released pair (local-polytope bound R*_L ≥ R*, still a valid "
                                                "certificate; --max-edges keeps the heaviest pairs).",
                                           rich_help_panel="DCC (--learner dcc)")] = "forest",
    loss: Annotated[str, typer.Option("--loss", help="dcc loss: 01 = 0-1 minimax risk (R*), hinge = worst-case hinge "
                                                     "loss (binary labels; certificate = worst-case hinge loss = 2R*).",
                                      rich_help_panel="DCC (--learner dcc)")] = "01",
    max_order: Annotated[int, typer.Option("--max-order",
                                           help="boost: largest monomial order (1-5; 2 reads the pair tables, 3-5 the "
                                                "tables a `marg request --learner boost` round brought).",
                                           rich_help_panel="Boost (--learner boost)")] = 2,
    kappa: Annotated[float, typer.Option("--kappa",
                                         help="boost: κ of the code-length price c(k) of a monomial of order k (bits "
                                              "of a weight, in log₂ n units).",
                                         rich_help_panel="Boost (--learner boost)")] = 1.5,
    patience: Annotated[int, typer.Option("--patience",
                                          help="boost: stop early when the bound has improved by at most --stall-tol "
                                               "over this many iterations (column generation can sit on a plateau for "
                                               "a few iterations before rules enter).",
                                          rich_help_panel="Boost (--learner boost)")] = 8,
    stall_tol: Annotated[float, typer.Option("--stall-tol",
                                             help="boost: the improvement of the bound (an error rate) that counts as "
                                                  "progress.", rich_help_panel="Boost (--learner boost)")] = 1e-6,
    select: Annotated[str, typer.Option("--select",
                                        help="Feature selection before the fit: none, group-lasso or gbd (exact "
                                             "best-M).", rich_help_panel="Feature selection")] = "none",
    max_features: Annotated[Optional[int], typer.Option("--max-features",
                                                        help="M: how many features to select (group lasso without it: "
                                                             "λ by GCV).", rich_help_panel="Feature selection")] = None,
    feature_cost: Annotated[Optional[float], typer.Option("--feature-cost",
                                                          help="gbd: a cost per selected feature instead of "
                                                               "--max-features (FSP-λ).",
                                                          rich_help_panel="Feature selection")] = None,
    norm: Annotated[str, typer.Option(help="Group-lasso group norm: linf (the paper's L1/L∞) or l2.",
                                      rich_help_panel="Feature selection")] = "linf",
    time_limit: Annotated[Optional[float], typer.Option(help="Seconds before stopping with the best bound so far "
                                                             "(valid at any stop): boost's column generation and nb's "
                                                             "exact certificate (default none: their work budgets "
                                                             "alone, so the certificate is the same on any machine), "
                                                             "gbd selection (default 60, with the certified gap "
                                                             "reached).", rich_help_panel="Time limit")] = None,
    pricing_nodes: Annotated[Optional[int], typer.Option("--pricing-nodes",  # ≥ 0 checked below, not by min=0
                                                         help="boost: the pricing searches' work budget, "
                                                              "branch-and-bound nodes summed over the fit (default "
                                                              "50,000; 0: search every pricing to optimality). Work, "
                                                              "not seconds: the same certificate on any machine.",
                                                         rich_help_panel="Boost (--learner boost)")] = None,
    trust: TrustOpt = None,
    allow_unsigned: UnsignedOpt = False,
    key: SealKeyOpt = None,
    passphrase_file: PassphraseOpt = None,
    sign_key: SignKeyOpt = None,
    sign_passphrase_file: SignPassOpt = None,
    no_sign: NoSignOpt = False,
    round_: Annotated[Optional[list[str]], typer.Option("--round",
                                                        help="Accept only bundles of this round (ROUND.json or id; "
                                                             "repeat for both rounds of the two-round "
                                                             "protocol).")] = None,
    history: HistoryOpt = None,
    site_ledger: SiteLedgerOpt = None,
    allow_unledgered: UnledgeredOpt = False,
    allow_empty: Annotated[bool, typer.Option("--allow-empty", help="Write an empty boost vote (refused otherwise).",
                                              rich_help_panel="Boost (--learner boost)")] = False,
) -> None:
    """Aggregate site bundles and fit a certified classifier from the summaries alone.

    Exit codes: 0 success; 1 refused (bad or missing signature, unknown signer); 2 bad input
    (malformed bundle, inconsistent statistics, an option the learner does not take);
    3 solver failure.
    """
    from marg.learners.estimator.base import LEARNERS
    from marg.learners.learn import learn as learn_model
    from marg.learners.learn import learn_estimator, option_takers, trivial_certificate_warning
    from marg.protocols.load import load_summary

    if learner not in LEARNERS:
        from marg.errors import InputError

        raise InputError(f"unknown learner {learner!r} (expected one of {', '.join(LEARNERS)})")
    options = {"s": s, "coverage": coverage, "prefer": prefer, "solver": solver, "eps": eps, "n_max": n_max,
               "k_max": k_max,
               "ridge": ridge, "alpha": alpha, "greedy": greedy, "max_edges": max_edges, "edge_weight": edge_weight,
               "structure": structure, "loss": loss,
               "max_order": max_order, "kappa": kappa, "patience": patience, "stall_tol": stall_tol}
    if time_limit is not None and learner in option_takers("time_limit"):  # else gbd's alone, as given
        options["time_limit"] = time_limit
    if pricing_nodes is not None and pricing_nodes < 0:  # Typer's min=0 would import pydantic at every learn
        from marg.errors import InputError

        raise InputError("learn: invalid value for '--pricing-nodes': Input should be greater than or equal to 0 "
                         "(see marg learn --help)")  # Typer's words for its range check
    if pricing_nodes is not None:  # a learner without a pricing budget refuses it below
        options["pricing_nodes"] = pricing_nodes or None
    defaults = inspect.signature(learn).parameters
    given = {k for k, v in options.items() if v != defaults[k].default}  # what the user set
    if pricing_nodes is not None:  # 0 means None (no budget): given all the same
        given.add("pricing_nodes")
    est = learn_estimator(learner, options, given)  # bad options fail before any file is read
    signer = _signer(sign_key, sign_passphrase_file, no_sign)  # a wrong key or passphrase fails before the work
    rounds = None
    if round_:
        from marg.protocols.rounds import read_round

        rounds = [read_round(r) for r in round_]
    seen: list = []
    said = None
    with CountProgress("bundles verified and summed", quiet=json_out) as prog:
        summary = load_summary(bundles, trust, allow_unsigned, key, passphrase_file, progress=prog, rounds=rounds,
                               history=_history(history, allow_unledgered, site_ledger, trust), observe=seen.append)
    if not rounds:
        from marg.protocols.rounds import round_warning

        said = round_warning([b.header.get("round") for b in seen])
    dropped = summary.provenance.get("dropped_tables")
    if dropped:
        err(f"note: {len(dropped)} tables not released by every site are left out (e.g. {dropped[0]})")
    note = est.start_note()
    if note:
        err(note)

    def selected(sel: Any) -> None:
        gap = f", certified gap {sel.gap:.3g}" if sel.gap is not None else ""
        err(f"{select}: selected {len(sel.selected)} features ({sel.status}{gap}): {', '.join(sel.selected)}")

    with LearnProgress(f"learn {learner}", quiet=json_out, time_limit=time_limit) as prog:
        res = learn_model(summary, learner, options, given, select=select, max_features=max_features,
                        feature_cost=feature_cost, norm=norm, time_limit=time_limit, callback=prog,
                        on_selected=selected)
        prog.finish(chosen=res.model.learner)
    if res.report.get("empty_vote") is not None and not allow_empty:
        from marg.errors import RefusedError

        why = res.report.get("empty_vote_reason") or "the boost vote is empty: no rule has a weight"
        raise RefusedError(f"{why}. Not written: --allow-empty writes an empty vote")
    res.model.save(out)
    signed = _sign(out, signer)
    if not rounds and said:  # after the fit: a refusal stays one line
        err(said)
    rep = {**res.report, "signed": signed != "unsigned"}
    fitted = res.model.estimator
    for line in fitted.learn_warnings(rep):
        err(line)
    if json_out:
        emit_json(rep)
        return
    cert = fitted.certificate_
    learner = res.model.learner
    if "auto" in rep:
        for line in choice_lines(rep):
            typer.echo(line)
    typer.echo(f"{learner} model from {len(rep['sites'])} site(s), n = {summary.n:,.0f}, {len(rep['features'])} "
               f"features → {out} ({signed})")
    if rep.get("unpaired_features"):
        typer.echo(f"features: the {len(rep['features'])} whose pair tables were all released "
                   f"({', '.join(rep['features'])}); left out, first-order tables only: "
                   f"{', '.join(rep['unpaired_features'])}")
    typer.echo(f"certificate: worst-case error ≤ {rep['worst_case_error']:.4f} {cert.words()}")
    warning = trivial_certificate_warning(res.model, summary.n)
    if warning:
        err(warning)
    if cert.approximate:
        err("note: part of this certificate's confidence box is a normal approximation (raw numeric features' means, "
            "or noise without recorded draws; see the README)")
    for line in fitted.learn_lines(rep):  # what this learner found, in its own words
        typer.echo(line)
    typer.echo(f"fitted in {res.seconds:.2f} s")


def choice_lines(rep: dict) -> list[str]:
    """The automatic choice as printed: the rule, how errors were estimated, and one row per
    candidate (estimated error, certificate, '*' on the chosen one, why a cell is empty)."""
    out = [f"auto: chose {rep['learner']} by {rep['auto_rule']}",
           f"  estimated error: {rep['auto_error_method']}"]
    from marg.learners.auto import candidate_name

    names = [candidate_name(c["learner"], c["params"]) for c in rep["auto"]]
    w = max(9, *(len(n) for n in names))
    out.append(f"    {'candidate':<{w}}  {'est. error':>10}  {'± se':>7}  {'certificate':>18}")
    for name, c in zip(names, rep["auto"]):
        est = "—" if c["error"] is None else f"{c['error']:.4f}"
        se = "—" if c.get("error_se") is None else f"{c['error_se']:.4f}"
        cert = "—" if c["certificate"] is None else f"{c['certificate']:.4f} ({c['kind']})"
        note = f"  {c['note']}" if c.get("note") else ""
        out.append(f"  {'*' if c['chosen'] else ' '} {name:<{w}}  {est:>10}  {se:>7}  {cert:>18}{note}")
    from marg.learners.choice.screened import screen_line

    line = screen_line(rep)
    if line:
        out.append(f"  {line}")
    return out


@app.command("request")
def request_cmd(
    bundles: Annotated[list[Path], typer.Argument(help="The bundles released so far (round 1: first-order tables; for "
                                                       "--learner boost: first-order and pair tables, plus any "
                                                       "earlier requested tables).")],
    out: OutOpt,
    top: Annotated[Optional[int], typer.Option("--top",
                                               help="Pair screening: how many features to keep (by the screening "
                                                    "score: the lower bound of their L1 dependence on the label under "
                                                    "the recorded noise).")] = None,
    learner: Annotated[Optional[str], typer.Option("--learner",
                                                   help="boost: request the higher-order tables whose bound says a "
                                                        "longer rule could enter (instead of screening "
                                                        "pairs).")] = None,
    max_order: Annotated[int, typer.Option("--max-order",
                                           help="boost: the longest rule the learner will fit (3-5); the request asks "
                                                "for tables one order above the released ones.")] = 3,
    max_tables: Annotated[int, typer.Option("--max-tables", help="boost: request at most this many tables (the "
                                                                 "largest bounds first).")] = 20,
    s: Annotated[Optional[float], typer.Option("--s", help="boost: λ multiplier of the round's fit (default: "
                                                           "calibrated).")] = None,
    kappa: Annotated[float, typer.Option("--kappa", help="boost: κ of the code-length price c(k).")] = 1.5,
    trust: TrustOpt = None,
    allow_unsigned: UnsignedOpt = False,
    key: SealKeyOpt = None,
    sign_key: Annotated[Optional[Path], typer.Option("--sign-key",
                                                     help="The learner's signing key: the request is signed "
                                                          "(select-then-measure, --top and --learner boost alike); "
                                                          "sites check it against their trust store (--trust). "
                                                          "Default: $MARG_SIGN_KEY, else the key in "
                                                          "$MARG_HOME/keys.")] = None,
    sign_passphrase_file: SignPassOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Ask the sites for more tables. From round-1 bundles of select-then-measure (no --top): what
    round 2 measures and how much each site spends, decided from the sites' private selections and
    signed (--sign-key); sites answer with `marg export DATA --request REQ --trust KEYS`. With --top K:
    the pairs of the top screened features; with --learner boost the higher-order tables a longer
    rule needs (sites answer with `marg export DATA --pairs @REQUEST.json`)."""
    from itertools import combinations

    from marg.errors import InputError
    from marg.learners.selection.screening import screen_scores
    from marg.protocols.load import load_summary

    if learner not in (None, "boost"):
        raise InputError(f"marg request --learner takes boost (higher-order tables for longer rules), got {learner!r}")
    if learner == "boost":
        if top is not None:
            raise InputError("--top screens features for pair tables; --learner boost ranks tables by its own bound")
        if max_tables < 1:
            raise InputError(f"--max-tables must be at least 1, got {max_tables}")
        from marg.learners.boost.request import rank_cliques
        from marg.learners.boost.vote import BoostVote

        with CountProgress("bundles verified and summed", quiet=json_out) as prog:
            summary = load_summary(bundles, trust, allow_unsigned, key, progress=prog)
        ranked = rank_cliques(BoostVote(s=s, max_order=max_order, kappa=kappa), summary)
        if not ranked:
            raise InputError("no higher-order table could let a rule enter (every bound is at most eps): nothing to "
                             "request")
        chosen = ranked[:max_tables]
        cliques = [b.clique for b in chosen]
        _write_pairs(out, summary.fingerprint, cliques, None, sign_key, sign_passphrase_file, json_out)
        if json_out:
            emit_json({"tables": [{"features": list(b.clique), "bound": b.bound, "class": b.cls, "rule": b.rule}
                                  for b in chosen], "qualified": len(ranked), "out": str(out)})
            return
        more = f" (of {len(ranked)} that qualify; raise --max-tables for more)" if len(ranked) > len(chosen) else ""
        typer.echo(f"wrote {out}: {len(chosen)} tables of {len(cliques[0])} features requested{more}")
        for b in chosen:
            typer.echo(f"  {' x '.join(b.clique)}: bound {b.bound:.4f} (e.g. {b.cls} if {b.rule})")
        typer.echo(f"sites answer with: marg export DATA --schema SCHEMA --site NAME --pairs @{out} ...")
        return
    if top is None:
        from .study import request_study

        res = request_study(bundles, out, trust, allow_unsigned, key, _signer(sign_key, sign_passphrase_file, False))
        if json_out:
            emit_json(res)
            return
        pairs_n = sum(len(c) > 1 for c in res["tables"])
        typer.echo(f"wrote {out}: {len(res['tables']) - pairs_n} first-order and {pairs_n} pair tables requested "
                   f"(features the sites agreed on: {', '.join(res['why']['kept'])})")
        typer.echo("round 2 per site: " + ", ".join(f"{s} rho = {r:.4g}" for s, r in sorted(res["budget"].items())))
        typer.echo(f"sites answer with: marg export DATA --schema SCHEMA --site NAME --out NAME.r2 --request {out} "
                   "--trust LEARNER-KEYS")
        return
    if top < 2:
        raise InputError(f"--top must be at least 2 (a pair needs two features), got {top}")
    with CountProgress("bundles verified and summed", quiet=json_out) as prog:
        summary = load_summary(bundles, trust, allow_unsigned, key, progress=prog)
    scores = screen_scores(summary)
    names = scores.order()[:top]
    above = len(scores.rank())
    pairs = list(combinations(sorted(names, key=summary.codebook.index), 2))
    _write_pairs(out, summary.fingerprint, pairs, names, sign_key, sign_passphrase_file, json_out)
    if json_out:
        emit_json({"features": names, "pairs": [list(p) for p in pairs], "above_noise": above, "out": str(out)})
        return
    typer.echo(f"wrote {out}: {len(names)} screened features, {len(pairs)} pair tables requested")
    typer.echo(f"features: {', '.join(names)} ({min(above, len(names))} of them above the noise: screening lower "
               "bound > 0)")
    typer.echo(f"sites answer with: marg export DATA --schema SCHEMA --site NAME --pairs @{out} ...")


def _write_pairs(out: Path, fingerprint: str, cliques: list, features: list | None, sign_key: Path | None,
                 passphrase_file: Path | None, quiet: bool) -> None:
    """Write a pair request (``--top``, ``--learner boost``) signed by the learner's key when one is
    given or configured (:mod:`marg.protocols.pair_request`); an unsigned one is said in one line."""
    from marg.marginals.request import write_request
    from marg.protocols.pair_request import signer

    who = _signer(sign_key, passphrase_file, False)
    write_request(out, fingerprint, cliques, features=features, sign=signer(who[0]) if who else None)
    if who is None and not quiet:
        err(f"note: {out} is unsigned: sites refuse it (marg export --pairs @{out.name} needs --allow-unsigned); "
            "sign it with --sign-key LEARNER.sign.key, or keep the learner's key in $MARG_HOME/keys")


@app.command("round")
def round_cmd(
    schema: SchemaOpt,
    out: OutOpt,
    sign_key: Annotated[Path, typer.Option("--sign-key",
                                           help="The learner's signing key (LEARNER.sign.key, role learner): sites "
                                                "check the round file's signature (marg export --round ROUND "
                                                "--trust).")],
    sign_passphrase_file: SignPassOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Start an aggregation round: a fresh id, signed by the learner, that sites sign into their bundles
    (marg export --round), so `marg learn --round` refuses replayed or stale bundles."""
    from marg.marginals.data.codebook import Codebook
    from marg.protocols.keys import load_signing_key, read_passphrase_file
    from marg.protocols.rounds import new_round

    pw = read_passphrase_file(sign_passphrase_file) if sign_passphrase_file else None
    rid = new_round(out, Codebook.load(schema).fingerprint, load_signing_key(sign_key, pw))
    if json_out:
        emit_json({"round": rid, "out": str(out)})
        return
    typer.echo(f"wrote {out}: round {rid}; sites export with --round {out.name}, the learner learns with --round "
               f"{out.name}")


@app.command("predict")
def predict(
    model: ModelArg,
    data: DataArg,
    out: OutOpt,
    schema: SchemaCheck = None,
    id_column: Annotated[Optional[str], typer.Option("--id", help="A column to copy into the output (e.g. a patient "
                                                                  "id).")] = None,
    flag_outside: Annotated[bool, typer.Option("--flag-outside",
                                               help="Add a column 'outside' (1/0): the row is outside the model's "
                                                    "uncertainty set, so its certificate does not cover it (mrc/dcc "
                                                    "models).")] = False,
    trust: ModelTrustOpt = None,
    allow_unsigned: ModelUnsignedOpt = False,
    json_out: JsonOpt = False,
) -> None:
    """Write class probabilities and the predicted label for every row of DATA (streamed; no partial file on
    failure)."""
    from marg import api

    m, signer = _verified_model(model, trust, allow_unsigned, schema)
    n, n_out = api.predict_file(m, data, out, id_column=id_column, flag_outside=flag_outside)
    if json_out:
        emit_json({"out": str(out), "n": n, "learner": m.learner, "classes": list(m.classes),
                   "outside": n_out if flag_outside else None, "signed_by": signer})
        return
    typer.echo(f"wrote {out}: {n:,} predictions ({m.learner} model, {_signed_words(signer)}, classes "
               f"{', '.join(m.classes)})")
    if flag_outside:
        typer.echo(f"{n_out:,} of {n:,} rows are outside the model's uncertainty set (column 'outside' = 1)")


@app.command("certify")
def certify_cmd(
    model: ModelArg,
    bundles: Annotated[list[Path], typer.Argument(help="The sites' evaluation releases of this model (marg export "
                                                       "DATA --evaluate MODEL).")],
    out: OutOpt,
    coverage: Annotated[float, typer.Option(help="Probability, over the held-out sample and the noise, that the bound "
                                                 "holds.")] = 0.95,
    evaluations: Annotated[Optional[int], typer.Option("--evaluations", metavar="K",
                                                       help="How many models were evaluated on these held-out rows "
                                                            "(this one included): the model's share of α is at most "
                                                            "1/K, said in the certificate. It can only lower the "
                                                            "share the sites' ledgers give (6/(π²·j²) for the j-th "
                                                            "model evaluated on the set, which covers keeping the "
                                                            "best of any number).")] = None,
    json_out: JsonOpt = False,
    trust: TrustOpt = None,
    allow_unsigned: UnsignedOpt = False,
    key: SealKeyOpt = None,
    passphrase_file: PassphraseOpt = None,
    sign_key: SignKeyOpt = None,
    sign_passphrase_file: SignPassOpt = None,
    no_sign: NoSignOpt = False,
) -> None:
    """Certify a model from its errors on the sites' held-out rows (released with DP noise).

    Exit codes: 0 success; 1 refused (bad or missing signature, unknown signer); 2 bad input
    (not an evaluation of this model file, another study).
    """
    from marg import api

    signer = _signer(sign_key, sign_passphrase_file, no_sign)
    res = api.certify_with_holdout(model, bundles, coverage=coverage, trust=trust, allow_unsigned=allow_unsigned,
                                   key=key, passphrase_file=passphrase_file, evaluations=evaluations)
    res.model.save(out)
    _sign(out, signer, quiet=json_out)
    b, certs = res.bound, res.certificates
    hold = res.model.info["holdout_certificate"]
    models = {k: hold[k] for k in ("models_on_split", "ordinal_on_split", "alpha_share", "models_known",
                                   "models_source", "models_note", "fractions")}
    if json_out:
        emit_json({"learner": res.model.learner, "worst_case_error": b.value, "certificate": {"kind": "holdout",
                   "coverage": coverage}, "sites": res.sites, **{k: v for k, v in b.to_dict().items() if k != "value"},
                   **models,
                   "site_certificates": {s: v.to_dict() for s, v in certs.sites.items()},
                   "class_certificates": {c: v.to_dict() for c, v in certs.classes.items()}})
        return
    typer.echo(f"{res.model.learner} model certified from {len(res.sites)} site(s)' held-out rows → {out}")
    noise = f" (noise sd {b.noise_sd:.1f}; held-out rows ≥ {b.rows_low:,} at {b.alpha_rows:.3g})" if b.noise_sd else ""
    typer.echo(f"released: {b.errors:,.0f} errors in {b.rows:,.0f} held-out rows{noise}")
    typer.echo(f"certificate: error ≤ {b.value:.4f} {res.model.estimator.certificate_.words()}")
    typer.echo(f"  population: {b.extra['population']}; {hold['models_note']}")
    if not hold["models_known"]:
        typer.echo(f"warning: {hold['models_note']}", err=True)
    for s, v in certs.sites.items():
        typer.echo(f"  site {s} (its own held-out rows, asked for by the site): error ≤ {v.value:.4f} "
                   f"({v.errors:,.0f} errors in {v.rows:,.0f} rows, {v.coverage:.0%})")
    if certs.classes:
        level = 1.0 - (1.0 - coverage) * hold["alpha_share"] / len(certs.classes)
        typer.echo(f"  by true class (all {len(certs.classes)} together at {coverage:.0%}, each at {level:.4g}): "
                   + ", ".join(f"{c} ≤ {v.value:.4f}" for c, v in certs.classes.items()))


@app.command("evaluate")
def evaluate_cmd(model: ModelArg, data: DataArg, json_out: JsonOpt = False, schema: SchemaCheck = None,
                 trust: ModelTrustOpt = None, allow_unsigned: ModelUnsignedOpt = False) -> None:
    """Accuracy and error of a model on labelled data, next to its certificate."""
    from marg import api

    m, signer = _verified_model(model, trust, allow_unsigned, schema)
    rep = api.evaluate_file(m, data)
    if json_out:
        emit_json({**{k: rep[k] for k in ("n", "accuracy", "error", "worst_case_error", "randomized_error", "confusion",
                                          "outside", "outside_error")}, "signed_by": signer})
        return
    typer.echo(f"{m.learner} model ({_signed_words(signer)}) on {rep['n']:,} rows of {data}:")
    typer.echo(f"  accuracy {rep['accuracy']:.4f}, error {rep['error']:.4f} (randomized rule: "
               f"{rep['randomized_error']:.4f})")
    typer.echo(f"  certificate (worst-case error bound): {rep['worst_case_error']:.4f}")
    if rep["outside"]:
        typer.echo(f"  {rep['outside']:,} rows ({rep['outside'] / rep['n']:.1%}) are outside the uncertainty set "
                   "(every label crosses a cell the released tables rule out): the certificate does not cover them; "
                   f"error there {rep['outside_error']:.4f}")
    classes = rep["classes"]
    width = max(8, *(len(c) for c in classes))
    typer.echo("  confusion matrix (rows: true, columns: predicted)")
    typer.echo("  " + " " * width + "".join(f"{c:>{width + 2}}" for c in classes))
    for c, row in zip(classes, rep["confusion"]):
        typer.echo(f"  {c:<{width}}" + "".join(f"{v:>{width + 2}}" for v in row))
