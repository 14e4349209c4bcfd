"""Deterministic generator of realistic hospital-like categorical data (for ``marg demo``).

A small Bayesian network over patient attributes — age band, sex, smoking, BMI band,
blood pressure, cholesterol, glucose, family history — drives a cardiovascular-event
outcome through a logistic model. Sites differ in population (age mix, smoking
prevalence, obesity), so the demo shows aggregation across heterogeneous hospitals.
Smoking status is sometimes unrecorded (an empty cell), which the codebook maps to an
explicit ``unknown`` level. Same seed, same rows.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .data.codebook import CategoricalFeature, Codebook, Label

AGE = ("18-39", "40-59", "60-79", "80+")
SEX = ("F", "M")
SMOKING = ("never", "former", "current", "unknown")
BMI = ("under", "normal", "over", "obese")
BP = ("normal", "elevated", "high")
CHOL = ("normal", "borderline", "high")
GLUCOSE = ("normal", "prediabetic", "diabetic")
FAMILY = ("no", "yes")
OUTCOME = ("no", "yes")


@dataclass(frozen=True)
class SiteProfile:
    """Population differences between sites."""

    name: str
    age_probs: tuple[float, float, float, float]
    smoking_shift: float  # added to the log-odds of being a current smoker
    obesity_shift: float  # added to the log-odds of the heavier BMI bands
    unrecorded_smoking: float  # fraction of rows with an empty smoking cell


SITES = (
    SiteProfile("north", (0.15, 0.30, 0.38, 0.17), 0.0, 0.2, 0.05),
    SiteProfile("south", (0.25, 0.35, 0.30, 0.10), 0.6, 0.5, 0.08),
    SiteProfile("city", (0.40, 0.35, 0.20, 0.05), -0.3, -0.2, 0.03),
)


def demo_codebook() -> Codebook:
    """The public codebook of the demo study (levels are clinical categories, not data)."""
    return Codebook(
        features=(
            CategoricalFeature("age_band", AGE),
            CategoricalFeature("sex", SEX),
            CategoricalFeature("smoking", SMOKING, missing="unknown"),
            CategoricalFeature("bmi_band", BMI),
            CategoricalFeature("blood_pressure", BP),
            CategoricalFeature("cholesterol", CHOL),
            CategoricalFeature("glucose", GLUCOSE),
            CategoricalFeature("family_history", FAMILY),
        ),
        label=Label("cv_event", OUTCOME),
    )


def _softmax_sample(rng: np.random.Generator, logits: np.ndarray) -> np.ndarray:
    """Sample one category per row from row-wise logits (n, m)."""
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    u = rng.random(p.shape[0])[:, None]
    return (u > np.cumsum(p, axis=1)).sum(axis=1).clip(0, p.shape[1] - 1)


def generate(n: int, site: SiteProfile | str = "north", seed: int = 0) -> dict[str, list[str]]:
    """Generate ``n`` patients of one site as ``{column: list of str}`` (empty = missing)."""
    if isinstance(site, str):
        by_name = {s.name: s for s in SITES}
        if site not in by_name:
            raise ValueError(f"unknown demo site {site!r} (one of {', '.join(by_name)})")
        site = by_name[site]
    rng = np.random.default_rng(seed)
    age = rng.choice(4, size=n, p=np.asarray(site.age_probs))
    sex = rng.integers(0, 2, size=n)
    # Smoking: never / former / current; older → more former, men → more current.
    sm_logits = np.column_stack(
        [np.full(n, 1.0), -0.8 + 0.45 * age + 0.2 * sex, -0.9 + 0.35 * sex - 0.25 * age + site.smoking_shift]
    )
    smoking = _softmax_sample(rng, sm_logits)
    # BMI band: heavier with age (up to 60-79) and by site.
    a = np.minimum(age, 2)
    bmi_logits = np.column_stack(
        [np.full(n, -1.5), np.full(n, 1.0), 0.6 + 0.3 * a + site.obesity_shift, -0.3 + 0.4 * a + site.obesity_shift]
    )
    bmi = _softmax_sample(rng, bmi_logits)
    heavy = (bmi >= 2).astype(float) + (bmi == 3)
    bp_logits = np.column_stack([np.full(n, 1.0), -0.4 + 0.4 * age + 0.3 * heavy, -1.6 + 0.8 * age + 0.5 * heavy])
    bp = _softmax_sample(rng, bp_logits)
    ch_logits = np.column_stack([np.full(n, 0.8), -0.2 + 0.25 * age + 0.2 * heavy, -1.2 + 0.45 * age + 0.3 * heavy])
    chol = _softmax_sample(rng, ch_logits)
    gl_logits = np.column_stack([np.full(n, 1.5), -0.8 + 0.3 * age + 0.5 * heavy, -2.5 + 0.5 * age + 0.9 * heavy])
    glucose = _softmax_sample(rng, gl_logits)
    family = (rng.random(n) < 0.22).astype(int)
    logit = (
        -4.3
        + 0.95 * age
        + 0.45 * sex
        + np.array([0.0, 0.35, 1.1])[smoking]
        + np.array([0.1, 0.0, 0.15, 0.5])[bmi]
        + np.array([0.0, 0.5, 1.3])[bp]
        + np.array([0.0, 0.35, 0.9])[chol]
        + np.array([0.0, 0.4, 1.0])[glucose]
        + 0.8 * family
    )
    outcome = (rng.random(n) < 1.0 / (1.0 + np.exp(-logit))).astype(int)
    smoke_txt = np.array(SMOKING[:3], dtype=object)[smoking]
    smoke_txt[rng.random(n) < site.unrecorded_smoking] = ""
    return {
        "patient_id": [f"{site.name[:1].upper()}{seed % 1000:03d}-{i:06d}" for i in range(n)],
        "age_band": [AGE[k] for k in age],
        "sex": [SEX[k] for k in sex],
        "smoking": list(smoke_txt),
        "bmi_band": [BMI[k] for k in bmi],
        "blood_pressure": [BP[k] for k in bp],
        "cholesterol": [CHOL[k] for k in chol],
        "glucose": [GLUCOSE[k] for k in glucose],
        "family_history": [FAMILY[k] for k in family],
        "cv_event": [OUTCOME[k] for k in outcome],
    }


def write_csv(path: str | Path, columns: dict[str, list[str]], rows: slice | None = None) -> None:
    """Write columns to a CSV file (optionally only a slice of the rows)."""
    names = list(columns)
    n = len(columns[names[0]])
    idx = range(n)[rows] if rows is not None else range(n)
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(names)
        for i in idx:
            w.writerow([columns[c][i] for c in names])


def visits(columns: dict[str, list[str]], seed: int = 0, mean_extra: float = 1.5,
           changing: tuple[str, ...] = ("blood_pressure", "glucose")) -> dict[str, list[str]]:
    """Longitudinal rows: each patient of ``columns`` (one row each, ``patient_id``) seen at
    1 + Poisson(``mean_extra``) visits, in the order of the patients; at each later visit every
    column of ``changing`` moves one level (up or down) with probability 0.3, the rest stays."""
    rng = np.random.default_rng(seed)
    n = len(columns["patient_id"])
    reps = 1 + rng.poisson(mean_extra, size=n)
    idx = np.repeat(np.arange(n), reps)
    out = {c: [v[i] for i in idx] for c, v in columns.items()}
    levels = {"blood_pressure": BP, "glucose": GLUCOSE, "cholesterol": CHOL, "bmi_band": BMI}
    first = np.concatenate([[True], idx[1:] != idx[:-1]])
    for c in changing:
        lv = levels[c]
        code = np.array([lv.index(v) for v in out[c]])
        step = np.where(rng.random(idx.size) < 0.3, rng.choice((-1, 1), size=idx.size), 0)
        step[first] = 0
        out[c] = [lv[k] for k in np.clip(code + step, 0, len(lv) - 1)]
    return out
