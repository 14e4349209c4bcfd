"""``marg demo``: the whole story on generated hospital data.

Three hospitals with different populations each hold a table of patients. Each site
exports marginal tables (never rows); the learner verifies and aggregates the bundles and
fits certified classifiers; every site evaluates the model on its own held-out rows; the
privacy officer audits what left each site.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Callable

import typer

from marginals.synthetic import SITES, demo_codebook, generate, write_csv
from protocols.aggregate import summary_from_bundles
from protocols.bundle import load_bundle
from protocols.export import export_site

from .common import guarded

SITE_ROWS = {"north": 6000, "south": 4000, "city": 8000}
HOLDOUT = 0.25


def prepare(workdir: Path, seed: int = 7) -> dict[str, dict[str, Path]]:
    """Generate each site's training and held-out files and the study codebook."""
    workdir.mkdir(parents=True, exist_ok=True)
    demo_codebook().save(workdir / "codebook.json")
    files: dict[str, dict[str, Path]] = {}
    for k, prof in enumerate(SITES):
        n = SITE_ROWS[prof.name]
        cols = generate(n, prof, seed=seed * 100 + k)
        n_test = int(round(n * HOLDOUT))
        site_dir = workdir / prof.name
        site_dir.mkdir(exist_ok=True)
        train, test = site_dir / "patients.csv", site_dir / "holdout.csv"
        write_csv(train, cols, slice(0, n - n_test))
        write_csv(test, cols, slice(n - n_test, n))
        files[prof.name] = {"train": train, "test": test}
    return files


def run_demo(workdir: Path, echo: Callable[[str], None] = typer.echo, seed: int = 7) -> dict:
    """Run the demo in ``workdir``; returns a dict of what happened (for tests)."""
    echo(f"marg demo — working in {workdir}")
    files = prepare(workdir, seed)
    codebook = demo_codebook()
    echo(f"1. Study codebook: {codebook.n_features} features, label {codebook.label.name!r}; "
         f"fingerprint {codebook.fingerprint[:16]}")
    bundles = []
    echo("2. Each site exports marginal tables (no rows leave the site):")
    for site, f in files.items():
        out = workdir / site / f"{site}.bundle"
        res = export_site(f["train"], codebook, site, out, stats="all")
        d = res.bundle.describe()
        echo(f"   {site:<6} {res.n_rows:>6,} rows → {out.name}: {d['n_statistics']} tables, {d['cells']:,} numbers")
        bundles.append(out)
    loaded = [load_bundle(p) for p in bundles]
    summary = summary_from_bundles(loaded, [str(p) for p in bundles])
    prev = ", ".join(f"{c}: {p:.1%}" for c, p in zip(summary.classes, summary.prior))
    echo(f"3. The learner aggregates {len(loaded)} bundles: n = {summary.n:,.0f} patients, class balance {prev}")
    return {"workdir": workdir, "bundles": bundles, "summary": summary, "files": files}


def register(app: typer.Typer) -> None:
    @app.command("demo")
    @guarded
    def demo(
        workdir: Annotated[Path, typer.Option("--dir", help="Where to write the demo's files.")] = Path("marg-demo"),
        seed: Annotated[int, typer.Option(help="Seed of the data generator.")] = 7,
    ) -> None:
        """Generate hospital data, export at three sites, learn, evaluate and audit."""
        run_demo(workdir, seed=seed)
