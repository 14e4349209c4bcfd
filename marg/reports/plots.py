"""The reports' plots, drawn by matplotlib (Agg) into PNG bytes; one function per plot.

Text that comes from the study (feature, level and class names) goes through :func:`plain`,
so matplotlib draws it as written: a ``$`` would otherwise start mathtext, and a name like
``$\\frac{$`` would stop the report with a parse error.
"""

from __future__ import annotations

import io
from typing import Sequence

from marg.errors import InputError


def _plt():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:  # pragma: no cover - matplotlib is a dependency
        raise InputError("reports need matplotlib: pip install matplotlib") from None
    return plt


def plain(text: str) -> str:
    """``text`` for a matplotlib label, drawn literally (every ``$`` escaped: no mathtext)."""
    return str(text).replace("$", r"\$")


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=100, metadata={"Software": None})  # same bytes on any matplotlib version
    _plt().close(fig)
    return buf.getvalue()


def bars(labels: Sequence[str], values: Sequence[float], title: str, xlabel: str) -> bytes:
    """Horizontal bars, largest |value| on top."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 0.3 * len(labels) + 1.2))
    ys = list(range(len(labels)))[::-1]
    ax.barh(ys, values, color=["#1f6feb" if v >= 0 else "#cf222e" for v in values])
    ax.set_yticks(ys, [plain(lab if len(lab) <= 40 else lab[:37] + "…") for lab in labels], fontsize=8)
    ax.axvline(0, color="#57606a", lw=0.8)
    ax.set_title(plain(title), fontsize=10)
    ax.set_xlabel(plain(xlabel), fontsize=9)
    return _png(fig)


def trace(values: Sequence[float], title: str, ylabel: str, xlabel: str = "iteration") -> bytes:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6, 3))
    ax.plot(range(1, len(values) + 1), values, marker="o")
    ax.set_title(title, fontsize=10)
    ax.set_xlabel(xlabel, fontsize=9)
    ax.set_ylabel(ylabel, fontsize=9)
    ax.grid(alpha=0.3)
    return _png(fig)


def confusion(matrix, classes: Sequence[str]) -> bytes:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(3.6, 3.2))
    ax.imshow(matrix, cmap="Blues")
    top = max(1, max(int(v) for row in matrix for v in row))
    for i in range(len(classes)):
        for j in range(len(classes)):
            v = int(matrix[i][j])
            ax.text(j, i, f"{v:,}", ha="center", va="center", fontsize=9, color="white" if v > 0.55 * top else "black")
    ax.set_xticks(range(len(classes)), [plain(c) for c in classes], fontsize=8)
    ax.set_yticks(range(len(classes)), [plain(c) for c in classes], fontsize=8)
    ax.set_xlabel("predicted", fontsize=9)
    ax.set_ylabel("true", fontsize=9)
    return _png(fig)


def spend(seqs: Sequence[int], cumulative: Sequence[float], cap: float | None, currency: str) -> bytes:
    """Cumulative privacy spend after each release (x: its ledger seq), against the cap."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6, 3))
    ax.step(list(seqs), cumulative, where="post", marker="o", label=f"spent {currency}")
    if cap is not None:
        ax.axhline(cap, color="#cf222e", ls="--", label=f"cap {cap:g}")
    ax.set_xticks(list(seqs))
    ax.set_ylim(bottom=0, top=max([*cumulative, cap or 0.0]) * 1.1 or 1.0)
    ax.set_xlabel("release (ledger seq)", fontsize=9)
    ax.set_ylabel(currency, fontsize=9)
    ax.set_title(f"Cumulative privacy spend ({currency})", fontsize=10)
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(alpha=0.3)
    return _png(fig)


def lasso_path(lams: Sequence[float], n_active: Sequence[int]) -> bytes:
    """Features in the model along the group-lasso path (λ decreasing, log scale)."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6, 3))
    ax.step(lams, n_active, where="post", marker="o")
    ax.set_xscale("log")
    ax.invert_xaxis()
    ax.set_xlabel("λ (group-lasso penalty)", fontsize=9)
    ax.set_ylabel("features selected", fontsize=9)
    ax.set_title("Regularization path", fontsize=10)
    ax.grid(alpha=0.3)
    return _png(fig)
