"""A study's design before anything is spent: each site's total as ρ, its split into the rounds (select, measure,
evaluate), the held-out fraction and the selection mode (pooled, private, or none: every first-order table).

**Known before spending** (nothing is read from the data): the codebook (p discrete candidates, their
levels m_i, C classes), the number of sites S and the rows per site n_s as stated publicly (None: the
split rule's ``DEFAULT_ROWS``, 300 a site, and the design says so), each site's study total (ε, δ) —
ρ_T, the largest ρ whose zCDP guarantee is (ε, δ)-DP (OpenDP's conversion,
:func:`marg.marginals.counts.dp_conversions.rho_for_epsilon`) —, the bound r on a patient's rows, the
secure-aggregation threshold t and how the noise is added.

The parts, each in its module: the selection modes' expected error and the choice between them
(:mod:`marg.marginals.study_modes`: the pooled noise in curators' units, ``"pooled"`` against ``"private"``);
the split of what training gets into the label table, the selection and round 2
(:mod:`marg.marginals.study_split`); the third mode, every first-order table
(:mod:`marg.marginals.study_first_order`); the evaluation round's held-out fraction and share
(:mod:`marg.marginals.study_evaluation`). This module puts them together (:func:`design_study`), records the
design (:class:`StudyDesign`, what the study file carries) and says it (:func:`design_lines`, ``marg plan``).

**Every first-order table** (the third mode, ``"first-order"``): where the study is narrow and small, no
selection — :mod:`marg.marginals.study_first_order` holds its gate, its split and its evaluation round
(sized for the comparison with the larger class).

It is a planning rule, not a guarantee: every split is (ε, δ)-DP at the site's total (the rounds'
ρ add to ρ_T), and every certificate holds whatever the split.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from marg.errors import InputError

from . import study_split as ss
from .counts.dp_conversions import rho_for_epsilon
from .study_evaluation import (COVERAGE, EVAL_SHARES, FRACTIONS, J_TIE, ROWS_SHARE, WIDTH_NEED, _cell_var,  # noqa: F401
                               _training, SEPARATE, choose_comparison, choose_evaluation, expected_bound, first_level,
                               separation, training_signal)
from .study_first_order import (COMPARISON_MAX, DETECT, FIRST_ORDER, FIRST_ORDER_MAX_P, FIRST_ORDER_RATIO,  # noqa: F401
                                GUARD, POWER, comparison_decisive, comparison_power,
                                first_order_fits, first_order_split, guard_sees)

from .study_modes import (FINDS, MODES, choose_mode, curators, mode_functions, mode_split, pooled_terms,  # noqa: F401
                          split_error)

NOISES = ("shared", "per-site")


# -- the design ----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class StudyDesign:
    """A study's design (module docstring): what each site spends in each round, the held-out fraction, the mode.

    Attributes
    ----------
    epsilon, delta, rho_total : float
        Each site's study total, (ε, δ) and its ρ_T (OpenDP's conversion).
    n_sites, threshold : int
        S and the secure-aggregation threshold t.
    noise : {"shared", "per-site"}
    rows : tuple of int
        The rows per site planned for (stated, or the split rule's default); ``rows_stated`` says which.
    max_rows : int
        r, the bound on a patient's rows (every count's sensitivity).
    levels, classes : the codebook's discrete levels and C.
    selection : {"pooled", "private"}
        Round 1's selection mode.
    k : int
        Features round 1 keeps.
    rho_label, rho_select, rho_measure, rho_evaluate : float
        Each site's ρ for the label table and the selection (round "select"), round 2 ("measure") and the
        evaluation ("evaluate"); they add to ρ_T. ``rho_select`` is, for ``"pooled"``, the p first-order tables
        N[x_i, y] at ``rho_select``/p each (pooled, the top-k computed from their noisy sums), for ``"private"``
        each site's OpenDP top-k at ``rho_select``. Under shared noise each ρ is what the round's sum over any t
        survivors meets (one curator's budget for the round).
    holdout : float
        The fraction of each site's patients held out (0 without the evaluation round).
    expected_error, expected_certificate : float
        The planning world's error at the chosen split, and the certificate to expect (1 without evaluation).
    split : dict
        :class:`marg.marginals.study_split.Split`'s record of the chosen split on the training rows.
    mode_errors : dict
        E of each selection mode at its own best split (full rows and ρ_T).
    evaluation : dict
        The evaluation rule's choice and what it minimised.
    """

    epsilon: float
    delta: float
    rho_total: float
    n_sites: int
    threshold: int
    noise: str
    rows: tuple[int, ...]
    rows_stated: bool
    max_rows: int
    levels: tuple[int, ...]
    classes: int
    selection: str
    k: int
    rho_label: float
    rho_select: float
    rho_measure: float
    rho_evaluate: float
    holdout: float
    expected_error: float
    expected_certificate: float
    split: dict[str, Any] = field(default_factory=dict)
    mode_errors: dict[str, float] = field(default_factory=dict)
    evaluation: dict[str, float] = field(default_factory=dict)

    @property
    def round_names(self) -> tuple[str, ...]:
        """The study's rounds, in order."""
        return ("select", "measure", "evaluate") if self.rho_evaluate > 0 else ("select", "measure")

    @property
    def rounds(self) -> dict[str, float]:
        """Each round's ρ per site: ``{"select": ρ_label + ρ_select, "measure": …, "evaluate": …}`` (sum ρ_T)."""
        out = {"select": self.rho_label + self.rho_select, "measure": self.rho_measure}
        if self.rho_evaluate > 0:
            out["evaluate"] = self.rho_evaluate
        return out

    @property
    def curators(self) -> float:
        return curators(self.noise, self.n_sites, self.threshold)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["rows"], d["levels"] = list(self.rows), list(self.levels)
        d["rounds"], d["round_names"] = self.rounds, list(self.round_names)
        rows = "; rows " + ("stated" if self.rows_stated else "assumed (none stated)")
        if self.selection == FIRST_ORDER:
            d["rule"] = ("marg.marginals.study_first_order: no selection (narrow and small: every first-order table "
                         "pooled at equal shares with the label table); "
                         + ("no evaluation round (too small for even the guard to see a model worse than the larger "
                            "class)" if self.evaluation.get("none") else
                            "the evaluation round sized for the comparison with the larger class")
                         + f"; the pooled noise {self.curators:g} curators' variance" + rows)
            return d
        d["rule"] = ("marg.marginals.study_design: the evaluation share and held-out fraction minimise the expected "
                     "certificate; the rest split by marg.marginals.study_split's rule on the training rows, the "
                     f"pooled noise {self.curators:g} curators' variance; selection {self.selection!r} by the smaller "
                     "expected error" + rows)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "StudyDesign":
        """The design recorded by :meth:`to_dict` (derived keys ignored); InputError naming a missing key."""
        names = [f for f in cls.__dataclass_fields__]
        missing = [n for n in names if n not in d and n not in ("split", "mode_errors", "evaluation")]
        if missing:
            raise InputError(f"study design: missing {', '.join(missing)}")
        kw = {n: d[n] for n in names if n in d}
        kw["rows"], kw["levels"] = tuple(int(v) for v in kw["rows"]), tuple(int(v) for v in kw["levels"])
        for n in ("split", "mode_errors", "evaluation"):
            kw[n] = dict(kw.get(n) or {})
        return cls(**kw)


def _check(n_sites: Any, epsilon: Any, delta: Any, threshold: Any, noise: str, max_rows: Any) -> None:
    if not isinstance(n_sites, (int, np.integer)) or isinstance(n_sites, bool) or n_sites < 1:
        raise InputError(f"the study needs a whole number of sites >= 1, got {n_sites!r}")
    if epsilon is None or not (float(epsilon) > 0.0 and math.isfinite(float(epsilon))):
        raise InputError(f"the study needs each site's total epsilon (> 0), got {epsilon!r}")
    if delta is None or not (0.0 < float(delta) < 1.0):
        raise InputError(f"the study needs 0 < delta < 1, got {delta!r}")
    if noise not in NOISES:
        raise InputError(f"noise must be one of {', '.join(NOISES)}, got {noise!r}")
    if noise == "shared" and (threshold is None or not 1 <= int(threshold) <= int(n_sites)):
        raise InputError(f"shared noise needs a secure-aggregation threshold 1 <= t <= {n_sites} sites, got "
                         f"{threshold!r}")
    if int(max_rows) != max_rows or max_rows < 1:
        raise InputError(f"max_rows must be a whole number >= 1, got {max_rows!r}")


def design_study(codebook: Any, n_sites: int, rows: Sequence[int] | None = None, epsilon: float | None = None,
                 delta: float | None = None, threshold: int | None = None, max_rows: int = 1, evaluate: bool = True,
                 noise: str = "shared", coverage: float = COVERAGE) -> StudyDesign:
    """The study's design from what is public (module docstring).

    Parameters
    ----------
    codebook : Codebook
        Its discrete features are the candidates (p, levels m_i) and its label the C classes.
    n_sites : int
        S.
    rows : sequence of int, optional
        The rows per site as stated publicly (never the data's count); None: 300 a site assumed.
    epsilon, delta : float
        Each site's total for the study.
    threshold : int
        The secure-aggregation threshold t (needed for ``noise="shared"``; per-site: ignored, recorded as S).
    max_rows : int
        r, the bound on a patient's rows.
    evaluate : bool
        Whether the study has the evaluation round (a held-out fraction and its share).
    noise : {"shared", "per-site"}

    Returns
    -------
    StudyDesign
    """
    _check(n_sites, epsilon, delta, threshold, noise, max_rows)
    S = int(n_sites)
    t = int(threshold) if noise == "shared" else S
    p = len(codebook.discrete_names)
    if p == 0:
        raise InputError("the study selects among discrete features; this codebook has none")
    levels = tuple(int(codebook.feature(a).n_levels) for a in codebook.discrete_names)
    stated = rows is not None
    rows_t = tuple(int(v) for v in rows) if stated else (ss.DEFAULT_ROWS[0],) * S
    if len(rows_t) != S or min(rows_t) <= 0:
        raise InputError(f"the rows per site must be {S} positive counts, got {list(rows_t)!r}")
    rho = rho_for_epsilon(float(epsilon), float(delta))
    C = int(codebook.label.n_classes)
    x = ss.SplitInputs(rows_t, levels, C, rho, int(max_rows), curators(noise, S, t))
    guarded = bool(evaluate)
    if ss.measures_all(x):
        splits = {"pooled": ss.measure_all_split(x)}
        mode = "pooled"
    else:
        splits = {m: mode_split(x, m, guarded) for m in MODES}
        mode = choose_mode(splits)
        if first_order_fits(x):  # measured, not the planning world's E (BENCHMARKS.md, issue 44 studyacc)
            splits[FIRST_ORDER] = first_order_split(x)
            mode = FIRST_ORDER
    errors = {m: float(s.expected_error) for m, s in splits.items()}
    ev_fo = choose_comparison(x, coverage) if evaluate and mode == FIRST_ORDER else None
    if ev_fo is not None:
        ev, f, a_e = ev_fo, ev_fo["holdout"], ev_fo["evaluate_share"]
        final = first_order_split(_training(x, f, a_e))
        cert = ev["expected_certificate"]
    elif evaluate and mode == FIRST_ORDER and guard_sees(GUARD[0] * sum(rows_t), _cell_var(x, GUARD[1]), C,
                                                         coverage) >= POWER:
        f, a_e = GUARD  # not decisive at these sizes: the least evaluation round, a guard only
        v = _cell_var(x, a_e)
        final = first_order_split(_training(x, f, a_e))
        p_m = min(0.5, float(final.expected_error))
        cert = expected_bound(p_m, f * sum(rows_t), v, C, coverage)
        ev = {"holdout": f, "evaluate_share": a_e, "power": comparison_power(f * sum(rows_t), v, C), "detect": DETECT,
              "model_error": p_m, "expected_certificate": cert, "expected_width": cert - p_m, "guard": 1.0}
    elif evaluate and mode == FIRST_ORDER:  # even the guard is blind here: no evaluation round (study_first_order)
        f, a_e = 0.0, 0.0
        final = splits[mode]
        cert = 1.0
        v = _cell_var(x, GUARD[1])
        ev = {"none": 1.0, "guard_caught": guard_sees(GUARD[0] * sum(rows_t), v, C, coverage),
              "power": comparison_power(GUARD[0] * sum(rows_t), v, C), "detect": DETECT}
        evaluate = False
    elif evaluate:
        ev = choose_evaluation(x, splits[mode], mode, coverage)
        f, a_e = ev["holdout"], ev["evaluate_share"]
        xt = _training(x, f, a_e)
        # the final split: ties within SELECT_TIE go to round 2 (the proxy does not see what its budget buys)
        final = ss.measure_all_split(xt) if ss.measures_all(xt) else mode_split(xt, mode, guarded, ss.SELECT_TIE)
        p_m = min(0.5, float(final.expected_error))
        var_cell = x.curators * float(max_rows) ** 2 / (2.0 * a_e * rho)
        cert = expected_bound(p_m, f * sum(rows_t), var_cell, C, coverage)
        ev = {**ev, "expected_certificate": cert, "model_error": p_m, "expected_width": cert - p_m}
    else:
        f, a_e, ev = 0.0, 0.0, {}
        final = splits[mode]
        cert = 1.0
    rest = (1.0 - a_e) * rho
    rho_eval = rho - rest if evaluate else 0.0
    return StudyDesign(float(epsilon), float(delta), rho, S, t, noise, rows_t, stated, int(max_rows), levels, C, mode,
                       int(final.k), final.label * rest, final.select * rest,
                       rho - rho_eval - (final.label + final.select) * rest,
                       rho_eval, float(f), float(final.expected_error), float(cert), final.to_dict(), errors, ev)


def design_lines(d: Mapping[str, Any]) -> list[str]:
    """``marg plan``'s words for a study design (:meth:`StudyDesign.to_dict`)."""
    r = d["rounds"]
    rows = "/".join(str(v) for v in d["rows"])
    out = [f"study design ({d['n_sites']} sites, {'stated' if d['rows_stated'] else 'assumed'} rows {rows}, "
           f"ε = {d['epsilon']:g} per site in total, ρ = {d['rho_total']:.4g}, noise {d['noise']}"
           + (f", t = {d['threshold']}" if d["noise"] == "shared" else "") + "):",
           (f"  select: ρ = {r['select']:.4g} (the label table only: no selection, every first-order table is "
            "measured in round 2)" if d["selection"] == FIRST_ORDER else
            f"  select: ρ = {r['select']:.4g} (label table {d['rho_label']:.4g}, {d['selection']} top-{d['k']} "
            f"{d['rho_select']:.4g}; expected error pooled {d['mode_errors'].get('pooled', float('nan')):.3f}"
            + (f", private {d['mode_errors']['private']:.3f}" if "private" in d["mode_errors"] else "") + ")"),
           f"  measure: ρ = {r['measure']:.4g}" + (f" (the {d['k']} first-order tables, naive Bayes)"
                                                  if d["selection"] == FIRST_ORDER else "")]
    if "evaluate" in r:
        ev = d["evaluation"]
        head = f"  evaluate: ρ = {r['evaluate']:.4g}, hold out {d['holdout']:.0%} of each site's patients; expected "
        if d["selection"] != FIRST_ORDER:
            need = ev.get("width_need")
            out.append(head
                       + f"certificate {d['expected_certificate']:.3f} (model error {ev['model_error']:.3f} + width "
                              f"{ev['expected_width']:.3f}; "
                       + (f"a width below {need:g} buys nothing, so among the rounds "
                              "that minimise the error plus the width, the one that leaves training the most)" if need
                          else
                              "chosen to minimise it)"))
        elif not ev.get("guard"):
            out.append(head + f"certificate {d['expected_certificate']:.3f}; the comparison with the larger class "
                              f"keeps a model {ev['detect']:g} better with probability {ev['power']:.2f}"
                       + (f" (at these sizes no evaluation round within 50 % of the patients and 50 % of ρ expects a "
                          f"certificate closer than {ev['least_width']:.2f} to the model's error)"
                          if "least_width" in ev
                          else ""))
        else:
            out.append(head + f"certificate {d['expected_certificate']:.3f}; a guard only: no round within "
                              f"{COMPARISON_MAX[0]:.0%} of the patients and {COMPARISON_MAX[1]:.0%} of ρ tells a model "
                              f"{ev['detect']:g} better from the larger class (probability {ev['power']:.2f}), so the "
                              "larger class is returned only when the model is shown worse")
    elif d["evaluation"].get("none"):
        ev = d["evaluation"]
        out.append(f"  evaluate: none (no patient held out): a guard round of {GUARD[0]:.0%} of the patients and "
                   f"{GUARD[1]:.0%} of ρ would catch even a model erring on every held-out patient with probability "
                   f"{ev['guard_caught']:.2f}, so every patient and the whole total train the model; its certificate "
                   "is its own (the confidence box's)")
    return out
