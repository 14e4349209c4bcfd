"""The whole marg story on generated hospital data (what ``marg demo`` runs).

Three hospitals with different populations each hold a table of patients (city's holds visits,
several rows per patient: its privacy unit is the patient, at most 3 rows each). Each site
creates its keys, configures a privacy budget, and exports differentially private
marginal tables (never rows) — signed, sealed to the learner and recorded in its ledger.
The learner verifies, opens and aggregates the bundles and fits certified classifiers
from the summaries alone; every site evaluates the models on its own held-out rows; the
privacy officer of each site audits what left it.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Callable, Iterator

from marg.learners.estimator.model import Model, evaluate
from marg._util import atomic_write_bytes
from marg.api import evaluate_file
from marg.learners.learn import learn
from marg.learners.estimator.model import model_info
from marg.learners.classifiers.mrc import MRC
from marg.marginals.data.encoding import encode_file
from marg.errors import InputError
from marg.marginals.accounting import PrivacyCost
from marg.marginals.synthetic import SITES, demo_codebook, generate, visits, write_csv
from marg.protocols.aggregate import summary_from_bundles
from marg.protocols.export import export_site
from marg.protocols.keys import generate_keys, load_seal_key, load_seal_public_key, load_signing_key
from marg.protocols.trust_store import TrustStore
from marg.protocols.ledger import Ledger
from marg.protocols.ledger_format import kind_of
from marg.protocols.signing import load_verified_bundle
from marg.protocols.site import SiteConfig, init_site

SITE_ROWS = {"north": 6000, "south": 4000, "city": 8000}
HOLDOUT = 0.25
EPSILON = 2.0  # per export, per site
CAP = 4.0  # each site's total budget for this dataset
CAP_DELTA = 1e-5
LONGITUDINAL = "city"  # this site's table holds visits: several rows per patient (the privacy unit is the patient)
MAX_VISITS = 3  # the rows of one patient its tables count at most (every table's sensitivity)
MARKER = ".marg-demo"


def _fresh_dir(workdir: Path) -> None:
    if workdir.exists() and any(workdir.iterdir()):
        if not (workdir / MARKER).exists():
            raise InputError(f"{workdir} exists and is not a marg demo folder; choose another --dir")
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / MARKER).write_text("files written by `marg demo`; safe to delete\n")


def site_columns(workdir: Path, seed: int, held: float) -> Iterator[tuple[Any, dict, int, int]]:
    """Write the study codebook into ``workdir``; then each site's profile, its generated columns
    (seeded by ``seed`` and the site), its row count n and how many of its rows are held back
    (``held`` · n, rounded): the generated data of both demos."""
    demo_codebook().save(workdir / "codebook.json")
    for k, prof in enumerate(SITES):
        n = SITE_ROWS[prof.name]
        yield prof, generate(n, prof, seed=seed * 100 + k), n, int(round(n * held))


def prepare(workdir: Path, seed: int = 7) -> dict[str, dict[str, Path]]:
    """Generate each site's training and held-out files and the study codebook."""
    files: dict[str, dict[str, Path]] = {}
    for prof, cols, n, n_test in site_columns(workdir, seed, HOLDOUT):
        site_dir = workdir / prof.name
        site_dir.mkdir(exist_ok=True)
        train, test = site_dir / "patients.csv", site_dir / "holdout.csv"
        if prof.name == LONGITUDINAL:  # its patients' visits: one row each
            write_csv(train, visits({c: v[:n - n_test] for c, v in cols.items()}, seed=seed))
        else:
            write_csv(train, cols, slice(0, n - n_test))
        write_csv(test, cols, slice(n - n_test, n))
        files[prof.name] = {"train": train, "test": test, "dir": site_dir}
    return files


def run_demo(workdir: Path, echo: Callable[[str], None] = print, seed: int = 7) -> dict:
    """Run the demo in ``workdir``; returns a dict of what happened (for tests)."""
    _fresh_dir(workdir)
    echo(f"marg demo — working in {workdir}")
    files = prepare(workdir, seed)
    codebook = demo_codebook()
    echo(f"1. The study shares a codebook: {codebook.n_features} features, label {codebook.label.name!r}; "
         f"fingerprint {codebook.fingerprint[:16]}")

    keys_dir, trust_dir = workdir / "learner", workdir / "learner" / "trust"
    trust_dir.mkdir(parents=True)
    learner_keys = generate_keys("learner", keys_dir, role="learner")
    site_keys = {}
    for site, f in files.items():
        kf = generate_keys(site, f["dir"] / "keys")
        shutil.copy(kf.sign_pub, trust_dir / kf.sign_pub.name)  # the learner's trust store
        site_keys[site] = kf
    echo(f"2. Keys: each site has an Ed25519 signing key (its public half is in the learner's trust store);"
         f" the learner has an X25519 key ({learner_keys.seal_id[:12]}…) that sites seal bundles to.")

    echo(f"3. Each site pins its key, records a privacy cap of (ε = {CAP:g}, δ = {CAP_DELTA:g}) in its signed ledger "
         f"and exports DP tables at (ε = {EPSILON:g}, δ = 1e-6) (Gaussian noise through OpenDP, the export's default),"
         f" signed, sealed and recorded in that ledger ({LONGITUDINAL} holds visits, several rows per patient: its"
         f" privacy unit is the patient, at most {MAX_VISITS} rows each, and its noise scales with that bound):")
    bundles, counted = [], {}
    learner_pub = load_seal_public_key(learner_keys.seal_pub)
    configs = {}
    for site, f in files.items():
        # the site's configuration (its own folder, as $MARG_HOME would be): pinned key, ledger, signed cap
        sk = load_signing_key(site_keys[site].sign_key)
        cfg = configs[site] = init_site(site, site_keys[site].sign_key, sk, f["dir"] / "marg-ledger",
                                        home=f["dir"] / "config")
        Ledger(cfg.ledger, site=cfg).set_cap(PrivacyCost(epsilon=CAP, delta=CAP_DELTA), sk, site)
        out = f["dir"] / f"{site}.bundle"
        res = export_site(
            f["train"], codebook, site, out, epsilon=EPSILON, rounds=1, signing_key=sk, recipient=learner_pub,
            recipient_name="learner", ledger_dir=cfg.ledger, site_home=cfg.home,
            **({"privacy_unit": "patient_id", "max_rows_per_unit": MAX_VISITS} if site == LONGITUDINAL else {}),
        )
        d = res.bundle.describe()
        echo(f"   {site:<6} {res.n_rows:>6,} rows → {out.relative_to(workdir)}: {d['n_statistics']} tables, "
             f"{d['cells']:,} noisy numbers, ε spent {res.cost.epsilon:.3g}")
        bundles.append(out)
        counted[site] = res.n_rows

    seal_key = load_seal_key(learner_keys.seal_key)
    store = TrustStore(trust_dir)
    loaded = [load_verified_bundle(p, store, seal_key=seal_key) for p in bundles]
    summary = summary_from_bundles(loaded, [str(p) for p in bundles])
    prev = ", ".join(f"{c}: {p:.1%}" for c, p in zip(summary.classes, summary.prior))
    echo(f"4. The learner opens and verifies {len(loaded)} bundles (signatures checked against its trust store) and")
    echo(f"   aggregates them: n ≈ {summary.n:,.0f} patients, class balance {prev} (noisy tables post-processed)")
    models = {}
    chosen = learn(summary, "auto", {})
    models["auto"] = chosen.model
    mrc = MRC().fit(summary)
    models["mrc"] = Model(learner="mrc", codebook=codebook, estimator=mrc, info=model_info(summary, mrc.report()))
    from marg.protocols.model_signing import sign_model_file

    learner_sign = load_signing_key(learner_keys.sign_key)
    for name, m in models.items():
        m.save(keys_dir / f"{name}.model.json")
        sign_model_file(keys_dir / f"{name}.model.json", learner_sign, "learner")  # sites verify it before use
    auto_cert = chosen.model.estimator.certificate_
    echo(
        f"5. Models fitted from the summaries alone, each with a certificate (worst-case error bound):\n"
        f"   default ({chosen.model.learner}, chosen by {chosen.report['auto_rule']}):\n"
        f"         {models['auto'].worst_case_error:.3f}  {auto_cert.words()}\n"
        f"   MRC   {models['mrc'].worst_case_error:.3f}  (over every distribution within the 95% confidence box, "
        "noise included)"
    )
    echo("6. Each site evaluates both models on its own held-out patients:")
    echo(f"   {'site':<6} {'rows':>6}  {'default error':>13}  {'MRC error':>9}")
    results: dict[str, dict[str, float]] = {}
    total = {name: 0.0 for name in models}
    n_all = 0
    for site, f in files.items():
        enc = encode_file(f["test"], codebook)
        r = {name: evaluate(m, enc.X, enc.y)["error"] for name, m in models.items()}
        results[site] = r
        n_all += enc.n
        for name in models:
            total[name] += r[name] * enc.n
        echo(f"   {site:<6} {enc.n:>6,}  {r['auto']:>13.3f}  {r['mrc']:>9.3f}")
    results["all"] = {name: total[name] / n_all for name in models}
    echo(f"   {'all':<6} {n_all:>6,}  {results['all']['auto']:>13.3f}  {results['all']['mrc']:>9.3f}")
    echo("   The certificates bound the error on the pooled population the summaries describe; a single site")
    echo("   whose patients differ (north and south are older) can sit above them.")

    echo("7. Each site's privacy officer audits its ledger (`marg audit show|verify --ledger DIR`):")
    audits = {}
    for site, f in files.items():
        led = Ledger(f["dir"] / "marg-ledger", site=SiteConfig.load(configs[site].home))
        rep = led.verify(bundle_paths=[f["dir"] / f"{site}.bundle"], public_key=site_keys[site].sign_pub)
        spent = led.spent()
        audits[site] = rep
        status = "chain and signatures verified, bundle accounted for" if rep.ok else f"FAILED: {rep.reason}"
        releases = sum(1 for e in led.entries() if kind_of(e) == "release")  # not the cap entry
        echo(f"   {site:<6} {releases} release(s) to 'learner', ε spent {spent.epsilon:.3g} of {CAP:g}; {status}")
    from marg.reports.audit_page import audit_page
    from marg.reports.model_card import model_card

    card = keys_dir / "model-card.html"
    atomic_write_bytes(card, model_card(models["auto"], evaluate_file(models["auto"], files["north"]["test"]),
                                        source="auto.model.json").encode("utf-8"))
    page = files["north"]["dir"] / "ledger.html"
    atomic_write_bytes(page, audit_page(Ledger(files["north"]["dir"] / "marg-ledger"),
                                        public_key=site_keys["north"].sign_pub).encode("utf-8"))
    echo(f"8. Reports: the model card {card} (marg report) and north's ledger page {page} (marg audit show --html).")
    echo(f"Files are in {workdir}. Try: marg audit show --ledger {files['north']['dir'] / 'marg-ledger'} "
         f"--key {site_keys['north'].sign_pub}")
    return {"workdir": workdir, "bundles": bundles, "summary": summary, "files": files, "models": models,
            "errors": results, "audits": audits, "rows": counted, "reports": {"model_card": card, "ledger": page}}


OMOP_SITES = {"north": 3000, "south": 2000, "east": 2500}  # persons in each generated CDM


def write_omop_demo(directory: Path, seed: int = 7) -> dict[str, Path]:
    """``marg demo --omop DIR``: three generated OMOP CDM 5.4 databases (DuckDB files,
    :mod:`marg.marginals.synthetic_omop`) and the example OMOP codebook in ``DIR``, for the README's "From an OMOP CDM
    database"; returns the files (``codebook`` and each site's database)."""
    import json

    from marg.marginals.data.codebook import Codebook
    from marg.marginals.synthetic_omop import example_codebook, generate_cdm, write_duckdb

    directory = Path(directory)
    _fresh_dir(directory)
    out = {"codebook": directory / "codebook.json"}
    Codebook.from_dict(example_codebook()).save(out["codebook"])
    spec = example_codebook()  # the definitions without the levels and edges: what `schema init --from-omop` drafts
    for f in spec["features"]:
        if "age_at" in f["omop"] or f["omop"].get("domain") == "measurement":
            f.pop("edges"), f.pop("missing", None), f.pop("type")
        elif "person" in f["omop"]:
            f.pop("levels")
    (directory / "spec.json").write_text(json.dumps(spec, indent=2) + "\n")
    first = 1
    for k, (site, n) in enumerate(OMOP_SITES.items()):
        out[site] = write_duckdb(generate_cdm(n, seed=seed * 100 + k, first_id=first), directory / f"{site}.duckdb")
        first += n
    return out
