"""The marg story told as a DP study (what ``marg demo`` runs): declared once, one command per party, until done.

Three hospitals with different populations and a learner, each with its own ``$MARG_HOME`` (keys,
ledger, study state) under the demo's folder, meet only in a drop box folder. The learner declares
the study (``marg study init``: the codebook, every party's keys, each site's total (ε, δ), the
secure-aggregation threshold t); then each party runs only ``marg study run`` until
``marg study status`` says done: the same library calls the commands make
(:func:`marg.study_runner.init_study`, :func:`marg.study_site.run_site`,
:func:`marg.study_learner.run_learner`, :func:`marg.study_runner.status`), in one process. Each site
finally checks the certified model on patients of its own that the study never saw, and its privacy
officer verifies its ledger. Every line printed says which party did what.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from pathlib import Path
from typing import Any, Callable, Iterator

from marg._util import atomic_write_bytes
from marg.demo import SITE_ROWS, _fresh_dir, site_columns
from marg.errors import InputError

STUDY_ROWS = dict(SITE_ROWS)  # each site's patients (as in the per-site demo), 20 % of them kept for its own check
CHECK = 0.2
EPSILON, DELTA = 1.0, 1e-6  # each site's total for the whole study
CAP, CAP_DELTA = 2.0, 1e-5  # each site's own cap for this dataset (its ledger refuses a spend above it)
THRESHOLD = 2
MAX_PASSES = 8


@contextlib.contextmanager
def as_party(home: Path) -> Iterator[None]:
    """Run as the party whose ``$MARG_HOME`` is ``home`` (restored after; no passphrase file)."""
    saved = {k: os.environ.get(k) for k in ("MARG_HOME", "MARG_PASSPHRASE_FILE")}
    os.environ["MARG_HOME"] = str(home)
    os.environ.pop("MARG_PASSPHRASE_FILE", None)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def prepare(workdir: Path, seed: int) -> dict[str, dict[str, Path]]:
    """The study codebook and each site's rows: ``SITE/patients.csv`` (the study's) and ``SITE/check.csv`` (its own)."""
    from marg.marginals.synthetic import write_csv

    files: dict[str, dict[str, Path]] = {}
    for prof, cols, n, n_check in site_columns(workdir, seed, CHECK):
        d = workdir / prof.name
        d.mkdir()
        files[prof.name] = {"home": d, "data": d / "patients.csv", "check": d / "check.csv"}
        write_csv(files[prof.name]["data"], cols, slice(0, n - n_check))
        write_csv(files[prof.name]["check"], cols, slice(n - n_check, n))
    return files


def _keys(workdir: Path, files: dict[str, dict[str, Path]]) -> tuple[Path, Path]:
    """Every party's keys in its home (``HOME/keys``); the roster folder of their public halves; the learner's home."""
    from marg.marginals.accounting import PrivacyCost
    from marg.protocols.keys import generate_keys, load_signing_key
    from marg.protocols.ledger import Ledger
    from marg.protocols.site import init_site

    roster, learner_home = workdir / "roster", workdir / "learner"
    roster.mkdir()
    parties = [(s, f["home"], "site") for s, f in files.items()] + [("learner", learner_home, "learner")]
    for name, home, role in parties:
        kf = generate_keys(name, home / "keys", role=role)
        for pub in (kf.sign_pub, kf.seal_pub):
            shutil.copy(pub, roster / pub.name)
        if role == "site":  # its configuration: the pinned key, the ledger, a signed cap (marg audit init / budget)
            sk = load_signing_key(kf.sign_key)
            cfg = init_site(name, kf.sign_key, sk, home / "ledger", home=home)
            Ledger(cfg.ledger, site=cfg).set_cap(PrivacyCost(epsilon=CAP, delta=CAP_DELTA), sk, name)
    return roster, learner_home


def _said(who: str, res: dict[str, Any], echo: Callable[[str], None]) -> int:
    for d in res["did"]:
        spent = f" (spent ρ = {d['spent']['rho']:.4g})" if "spent" in d else ""
        echo(f"   {who:<7} {d['did']}{spent}")
    return len(res["did"])


def run_study_demo(workdir: Path, echo: Callable[[str], None] = print, seed: int = 7) -> dict[str, Any]:
    """Run the study demo in ``workdir`` (module docstring); return what happened (for tests)."""
    from marg.learners.estimator.model import Model, evaluate
    from marg.marginals.data.encoding import encode_file
    from marg.protocols.ledger import Ledger
    from marg.protocols.ledger_format import kind_of
    from marg.protocols.model_signing import read_verified_model
    from marg.protocols.site import SiteConfig
    from marg.protocols.trust_store import TrustStore
    from marg.study_learner import run_learner
    from marg.study_runner import init_study, status
    from marg.study_site import run_site

    _fresh_dir(workdir)
    echo(f"marg demo — a DP study of three hospitals and a learner, in {workdir}")
    files = prepare(workdir, seed)
    from marg.marginals.data.codebook import Codebook

    cb = Codebook.load(workdir / "codebook.json")
    echo(f"1. The study shares a codebook: {cb.n_features} features, label {cb.label.name!r} "
         f"(fingerprint {cb.fingerprint[:16]}); each hospital holds its patients' rows, which never leave it.")
    roster, learner_home = _keys(workdir, files)
    echo("2. Every party makes its keys (marg keys init): a signing key and a sealing key each; the public halves go "
         f"in one roster folder ({roster.name}/). Each hospital records a cap of (ε = {CAP:g}, δ = {CAP_DELTA:g}) in "
         "its signed ledger (marg audit init, marg audit budget).")
    drop = workdir / "drop"
    drop.mkdir()
    study = workdir / "study.json"
    rows = [int(round(n * (1 - CHECK))) for n in STUDY_ROWS.values()]
    with as_party(learner_home):
        doc = init_study(workdir / "codebook.json", roster, EPSILON, DELTA, str(drop),
                         learner_home / "keys" / "learner.sign.key",
                         study, threshold=THRESHOLD, rows=rows)
    rho = doc["plan"]["rho"]
    echo(f"3. learner  marg study init → {study.name}: signed; every party's keys pinned; ε = {EPSILON:g}, δ = "
         f"{DELTA:g} per hospital for the whole study; t = {doc['threshold']} (secure aggregation: the learner sees "
         f"only the sum of at least t hospitals' tables, which carries one curator's noise: {doc['noise']} noise); "
         f"{doc['holdout']:.0%} of each hospital's patients held out for the certificate; drop box {drop.name}/.")
    echo("   The budget's rounds, chosen from public quantities before anything is spent: "
         + ", ".join(f"{r} ρ = {v:.4g}" for r, v in rho.items()) + ".")
    echo("4. Each party runs one command until the study is done (marg study run study.json --learner; at each "
         "hospital marg study run study.json --site NAME --data NAME/patients.csv):")
    passes, done, commands = 0, False, 0
    for passes in range(1, MAX_PASSES + 1):
        with as_party(learner_home):
            res = run_learner(study)
        commands += 1
        _said("learner", res, echo)
        if res["next"].startswith("none"):
            done = True
            break
        for site, f in files.items():
            with as_party(f["home"]):
                commands += 1
                _said(site, run_site(study, site, str(f["data"])), echo)
    if not done:
        # not expected: every pass progresses
        raise InputError(f"the demo's study was not done after {MAX_PASSES} passes")
    st = status(study)
    result = st["result"]
    echo(f"5. anyone   marg study status study.json: done after {passes} passes ({commands} runs); "
         + "; ".join(f"{s} {v['state']}, spent ρ = {v['rho']:.4g}" for s, v in st["sites"].items()))
    from marg.protocols.study_file import read_study

    lrn = read_study(study).learner
    trust = TrustStore.from_keys({lrn.site: lrn.sign_pub}, {lrn.site: "learner"})
    raw, signer = read_verified_model(drop / "final" / "model.json", trust)
    model = Model.from_bytes(raw, "final/model.json")
    ev = result["evaluation"]
    echo(f"6. The certified model ({drop.name}/final/model.json, signed by the {signer}): {model.learner} on "
         f"{len(model.codebook.feature_names)} feature(s) chosen from the pooled round 1; holdout certificate "
         f"{result['certificate']:.3f} (95 %, on the {ev['rows']:,.0f} held-out patients' pooled errors; kept: "
         f"{ev['kept']}).")
    echo("   Each hospital checks it on patients of its own the study never saw:")
    errors, n_all, err_all = {}, 0, 0.0
    for site, f in files.items():
        enc = encode_file(f["check"], model.codebook)
        errors[site] = float(evaluate(model, enc.X, enc.y)["error"])
        n_all, err_all = n_all + enc.n, err_all + errors[site] * enc.n
        echo(f"   {site:<7} {enc.n:>5,} patients  error {errors[site]:.3f}")
    errors["all"] = err_all / n_all
    echo(f"   {'all':<7} {n_all:>5,} patients  error {errors['all']:.3f} (the certificate bounds the pooled "
         "population's)")
    echo("7. Each hospital's privacy officer audits its ledger (marg audit show|verify):")
    audits = {}
    for site, f in files.items():
        cfg = SiteConfig.load(f["home"])
        led = Ledger(cfg.ledger, site=cfg)
        rep = audits[site] = led.verify(public_key=f["home"] / "keys" / f"{site}.sign.pub")
        releases = [e for e in led.entries() if kind_of(e) == "release"]
        spent = sum(float((e.get("cost") or {}).get("rho", 0.0)) for e in releases)
        ok = "chain and signatures verified" if rep.ok else f"FAILED: {rep.reason}"
        echo(f"   {site:<7} {len(releases)} releases to the study, ρ = {spent:.4g} of the study's "
             f"{doc['plan']['rho_total']:.4g} (ε = {EPSILON:g} at δ = {DELTA:g}), within its cap ε = {CAP:g}; {ok}")
    from marg.api import evaluate_file
    from marg.reports.audit_page import audit_page
    from marg.reports.model_card import model_card

    card = learner_home / "model-card.html"
    atomic_write_bytes(card, model_card(model, evaluate_file(model, files["north"]["check"]),
                                        source="final/model.json").encode("utf-8"))
    page = files["north"]["home"] / "ledger.html"
    atomic_write_bytes(page, audit_page(Ledger(SiteConfig.load(files["north"]["home"]).ledger),
                                        public_key=files["north"]["home"] / "keys" / "north.sign.pub").encode("utf-8"))
    echo(f"8. Reports: the model card {card} (marg report) and north's ledger page {page} (marg audit show --html).")
    echo(f"Files are in {workdir}. Try: marg study status {study}")
    return {"workdir": workdir, "study": study, "drop": drop, "files": files, "status": st, "result": result,
            "model": model, "errors": errors, "audits": audits, "passes": passes, "commands": commands,
            "plan": json.loads(study.read_text())["plan"]}
