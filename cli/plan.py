"""``marg plan``: the holdout certificate a site can expect before it spends anything, and the plan that minimises it.

With ``--schema`` it also says what the DP default (select, then measure) will measure and at
what noise: the split rule's shares of the study total and why
(:mod:`marg.marginals.study_split`), round 1's noise, round 2's tables
(:func:`marg.learners.study.two_round.preview`), and the study's design
(:func:`marg.marginals.study_design.design_study`: each round's ρ, the held-out fraction, the
selection mode; shared noise from three sites on, as ``marg study init`` plans it).

The numbers come from :mod:`marg.learners.certification.holdout_plan` (the bound of
:mod:`marg.learners.certification.holdout_certificate` at the expected released counts, with the noise
scales of the release code); :func:`marg.learners.certification.holdout_plan.resolve_plan` is what ``marg export
--holdout auto`` uses, so the plan printed here is the plan an export would record.
"""


from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from marg.errors import InputError
from marg.marginals.accounting import DEFAULT_DELTA

from .app import app
from .common import JsonOpt, emit_json


def parse_rows(text: str) -> list[int]:
    """``"240"`` or ``"240,145,97"`` → row counts (one line error otherwise)."""
    try:
        rows = [int(t) for t in str(text).split(",") if t.strip()]
    except ValueError:
        raise InputError(f"--rows must be a row count or a comma-separated list of counts, got {text!r}") from None
    if not rows or min(rows) <= 0:
        raise InputError(f"--rows must be positive row counts, got {text!r}")
    return rows


def parse_auto(text: str | None, what: str) -> float | None:
    """``"auto"`` → None; a number → float (one-line error otherwise)."""
    if text is None or str(text).strip().lower() == "auto":
        return None
    try:
        return float(text)
    except ValueError:
        raise InputError(f"{what} must be a number or auto, got {text!r}") from None


@app.command("plan")
def plan_cmd(
    rows: Annotated[str, typer.Option("--rows", help="Rows per site as stated publicly: one count (with --sites) or "
                                                     "one per site, 240,145,97.")],
    epsilon: Annotated[float, typer.Option("--epsilon", help="Each site's total ε (training tables + evaluation).")],
    sites: Annotated[Optional[int], typer.Option("--sites",
                                                 help="Number of sites when --rows gives one count.")] = None,
    error: Annotated[float, typer.Option("--error", help="The error rate the model is expected to reach.")] = 0.2,
    holdout: Annotated[str, typer.Option("--holdout",
                                         help="Fraction of rows held out, or auto (the planner's choice).")] = "auto",
    evaluate_epsilon: Annotated[str, typer.Option("--evaluate-epsilon", help="ε of the evaluation release, or auto "
                                                                             "(the planner's split).")] = "auto",
    schema: Annotated[Optional[Path], typer.Option("--schema", help="The study codebook: its number of features "
                                                                    "enters the split rule.")] = None,
    features: Annotated[Optional[int], typer.Option("--features",
                                                    help="Number of features (instead of --schema).")] = None,
    margin: Annotated[float, typer.Option("--margin",
                                          help="Informative: a certificate within this of the error.")] = 0.2,
    coverage: Annotated[float, typer.Option(help="Coverage of the certificate.")] = 0.95,
    threshold: Annotated[Optional[int], typer.Option("--threshold",
                                                     help="With --schema: the study's secure-aggregation threshold t "
                                                          "(default: more than half the sites).")] = None,
    json_out: JsonOpt = False,
) -> None:
    """The holdout certificate to expect at these rows and ε, and the rows or ε that would make it informative.

    Spends nothing and reads no data: every input is what the sites declare.
    """
    from marg.learners.certification.holdout_plan import needed_for, resolve_plan

    row_list = parse_rows(rows)
    if sites is not None and len(row_list) not in (1, sites):
        raise InputError(f"--rows gives {len(row_list)} counts for --sites {sites}")
    study = design = None
    if schema is not None:
        from marg.learners.study.two_round import preview
        from marg.marginals.data.codebook import Codebook

        cb = Codebook.load(schema)
        features = cb.n_features
        if cb.discrete_names:
            rl = row_list * sites if (sites and len(row_list) == 1) else row_list
            study = preview(cb, rl, epsilon, DEFAULT_DELTA)
            design = study_design(cb, rl, epsilon, threshold)
    f_given, e_given = parse_auto(holdout, "--holdout"), parse_auto(evaluate_epsilon, "--evaluate-epsilon")
    if features is None:
        if f_given is None or e_given is None:
            raise InputError("--holdout auto / --evaluate-epsilon auto weigh the training tables: give --schema or "
                             "--features")
        features = 1
    plan = resolve_plan(row_list, sites, epsilon, error, features, f_given, e_given, coverage=coverage)
    need = needed_for(plan["rows"], plan["epsilon_evaluate"], plan["model_error"], None, plan["holdout"], margin,
                      coverage=coverage)
    plan["needed"] = need
    plan["informative"] = plan["expected_certificate"] <= need["target"]
    if study is not None:
        plan["select_then_measure"] = study
    if design is not None:
        plan["study_design"] = design
    if json_out:
        emit_json(plan)
        return
    if study is not None:
        for line in preview_lines(study):
            typer.echo(line)
    if design is not None:
        from marg.marginals.study_design import design_lines

        for line in design_lines(design):
            typer.echo(line)
    r = plan["rows"]
    typer.echo(f"{len(r)} site(s) of {'/'.join(str(x) for x in r)} rows, ε = {epsilon:g} per site, expected error "
               f"{error:g}")
    typer.echo(f"  plan: hold out {plan['holdout']:.0%} of the rows (≈ {sum(r) * plan['holdout']:.0f} patients); "
               f"tables ε = {plan['epsilon_tables']:.3g}, evaluation ε = {plan['epsilon_evaluate']:.3g}"
               + ("" if plan["rule"] == "given" else " (chosen to minimise the expected certificate)"))
    typer.echo(f"  expected holdout certificate: {plan['expected_certificate']:.3f} at {coverage:.0%} "
               f"(model error taken as {plan['model_error']:.3f})")
    tgt = need["target"]
    verdict = "informative" if plan["informative"] else "not informative"
    typer.echo(f"  {verdict} (≤ error + {margin:g} = {tgt:.3f} is the target); it would take:")
    typer.echo("    rows per site: " + ("/".join(str(x) for x in need["rows"]) if need["rows"]
                                        else "more than 10^5 times these")
               + " at this evaluation ε")
    typer.echo("    evaluation ε per site: " + (f"{need['epsilon']:.3g}" if need["epsilon"] is not None else
                                                "none suffices at these rows (even exact counts)") + " at these rows")


def study_design(cb: Any, rows: list[int], epsilon: float, threshold: int | None) -> dict[str, Any]:
    """The design ``marg study init`` records for these public inputs: shared noise from three sites on (threshold
    ``threshold``, default ⌊S/2⌋ + 1), per-site noise below (:func:`marg.marginals.study_design.design_study`)."""
    from marg.marginals.study_design import design_study

    S = len(rows)
    noise = "shared" if S >= 3 else "per-site"
    t = threshold if threshold is not None else S // 2 + 1
    return design_study(cb, S, rows, epsilon, DEFAULT_DELTA, t, noise=noise).to_dict()


def split_line(plan: dict[str, Any]) -> str:
    """The split rule's choice in words: shares, k, for which rows, and the expected error it minimised."""
    sp = plan.get("split") or {}
    rows = "/".join(str(r) for r in plan.get("rows", []))
    if not sp:
        return "split of the study total: recorded without the rule's record"
    if sp.get("measure_all"):
        return (f"split of the study total ({'stated' if plan.get('rows_stated') else 'assumed'} rows {rows}): every "
                f"candidate measured (round 2 affords the whole one-round workload within the noise rule): label table "
                f"{sp['label_share']:.0%}, a noisy ranking of all {sp['k']} {sp['select_share']:.0%} (which pairs come "
                f"first), round 2 {sp['round2_share']:.0%}")
    return ("split of the study total (rule: least expected error, "
            f"{'stated' if plan.get('rows_stated') else 'assumed'} rows "
            f"{rows}{'' if plan.get('rows_stated') else '; state yours with --plan-rows'}): label table "
            f"{sp['label_share']:.0%}, selection {sp['select_share']:.0%} (top-{sp['k']}), round 2 "
            f"{sp['round2_share']:.0%}; P(the sites agree on a feature worth finding) {sp['p_any']:.2f}, P(wrong "
            f"larger class if not) {sp['p_wrong']:.2f}"
            + (f" (by the Laplace label table released: {sp['p_wrong_released']:.2g})" if "p_wrong_released" in sp
               else "")
            + f", expected error {sp['expected_error']:.3f} in the planning world (gap "
            f"{sp['assumed']['gap']:g}, effect {sp['assumed']['effect']:g}, {sp['assumed']['features']} such features)")


def preview_lines(d: dict[str, Any]) -> list[str]:
    """``marg plan``'s words for the DP default (:func:`marg.learners.study.two_round.preview`)."""
    pl = d["plan"]
    pairs = (f"the {d['round2_pairs']} pair tables among the first {d['round2_pairs_among']} (pooled noise std "
             f"{d['round2_pair_std']:.3g} per cell)" if d["round2_pairs"]
             else "no pair table (too noisy at these rows)")
    return [f"DP default, select then measure, ε = {pl['epsilon']:g} per site in total (ρ = {pl['rho_total']:.4g}):",
            "  " + split_line(pl),
            f"  round 1: the label table ({d.get('label_mechanism', 'gaussian')}, noise std {d['label_std']:.3g} per "
            f"cell per site) and a private top-{pl['k']} "
            f"of {pl['candidates']} features (Gumbel scale {d['selection_scale']:.3g} on each feature's correct "
            f"count), ρ = {pl['rho_label'] + pl['rho_select']:.4g}",
            f"  round 2 (ρ = {pl['rho_rest']:.4g} per site), "
            + ("on every feature (none dropped)" if (pl.get("split") or {}).get("measure_all") else
               f"if the sites agree on {pl['k']} features") + ": the first-order "
            f"tables of {d['round2_first_order']} (pooled noise std {d['round2_first_std']:.3g} per cell) and {pairs}"]
