"""The holdout protocol: rows left out of the export by a keyed hash, the model's confusion matrix on them, the
certificate.

What is checked: the split is a function of the rows' content and the site's key (not of
their order or of how the file is chunked), holds out each row — identical rows included —
independently with probability F; the round trip certifies the model's error on exactly
the rows the training release left out; and the attack of issue 24 (train on a bundle
exported without the holdout, evaluate on the "held-out" rows, certify) is refused in one
line at the site and at ``marg certify``, through the installed console script.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.stats import beta

from marg.learners.estimator.model import Model
from marg.marginals.data.encoding import encode_file
from marg.marginals.holdout import Holdout, Splitter, select, site_key
from marg.marginals.synthetic import SITES, demo_codebook, generate, write_csv
from tests.helpers.console import marg, run
from tests.helpers.study import write_study

G1 = 6 / np.pi ** 2  # the first model's share of α on its held-out set

KEY = b"k" * 32


def held_rows(enc, split: Splitter) -> list[tuple]:
    """The held-out rows of one encoded chunk as sorted tuples (a multiset)."""
    mask = split.mask(enc)
    X, y = enc.X[mask], enc.y[mask]
    return sorted(map(tuple, np.column_stack([X, y]).tolist()))


def test_split_depends_on_the_rows_and_the_key_not_on_their_order_or_chunking(tmp_path):
    cb = demo_codebook()
    write_csv(tmp_path / "a.csv", generate(4000, SITES[0], seed=5), slice(0, 4000))
    enc = encode_file(tmp_path / "a.csv", cb)
    spec = Holdout(0.3)
    whole = held_rows(enc, Splitter(spec, KEY))
    # in chunks: the tally of each chunk's occurrences carries over
    split = Splitter(spec, KEY)
    chunks: list[tuple] = []
    for lo, hi in ((0, 1000), (1000, 1001), (1001, 4000)):
        keep = np.zeros(enc.n, dtype=bool)
        keep[lo:hi] = True
        chunks += held_rows(select(enc, keep), split)
    assert sorted(chunks) == whole
    # the rows in another order: the same multiset of held-out rows, the same fingerprint
    perm = np.random.default_rng(1).permutation(enc.n)
    a, b = Splitter(spec, KEY), Splitter(spec, KEY)
    shuffled = select(enc, np.ones(enc.n, dtype=bool))
    shuffled.parts = tuple(np.asarray(enc.column(i))[perm] for i in range(len(enc.parts)))
    shuffled.y = enc.y[perm]
    shuffled._cols = {}
    assert held_rows(shuffled, b) == whole and (held_rows(enc, a), a.fingerprint) == (whole, b.fingerprint)
    # another key: another split
    assert held_rows(enc, Splitter(spec, b"x" * 32)) != whole
    for bad in (0.0, 1.0, -0.1):
        with pytest.raises(Exception, match="--holdout must be a fraction in"):
            Holdout(bad)


def test_identical_rows_are_held_out_independently():
    """10,000 copies of one row: the number held out is Binomial(10,000, F), not all or nothing
    (a hash of the content alone would put every copy on the same side), and a smaller F holds out
    a subset of a larger F's copies."""
    from marg.marginals.data.encoding import Encoded

    n = 10_000
    enc = Encoded([np.zeros(n, dtype=np.uint8), np.ones(n, dtype=np.uint8)], np.zeros(n, dtype=np.int64), 1)
    for key in (KEY, b"y" * 32, b"z" * 32):
        big, small = Splitter(Holdout(0.3), key).mask(enc), Splitter(Holdout(0.1), key).mask(enc)
        assert abs(big.sum() - 0.3 * n) < 5 * (0.3 * 0.7 * n) ** 0.5
        assert abs(small.sum() - 0.1 * n) < 5 * (0.1 * 0.9 * n) ** 0.5
        assert not np.any(small & ~big)


def test_an_id_column_keeps_a_patients_rows_together(tmp_path):
    import pyarrow as pa

    from marg.errors import InputError

    ids = pa.array([f"P{k // 3:05d}" for k in range(6000)])  # three rows per patient
    split = Splitter(Holdout(0.25, "pid"), KEY)
    from marg.marginals.data.encoding import Encoded

    enc = Encoded([np.arange(6000) % 7], np.zeros(6000, dtype=np.int64), 1)
    held = split.mask(enc, ids).reshape(-1, 3)
    assert np.all(held.all(axis=1) | ~held.any(axis=1))  # all of a patient's rows, or none
    assert abs(held[:, 0].sum() - 500) < 5 * (2000 * 0.25 * 0.75) ** 0.5
    with pytest.raises(InputError, match=r"--holdout-id column 'pid': missing id at row 3"):
        Splitter(Holdout(0.25, "pid"), KEY).mask(Encoded([np.zeros(3)], np.zeros(3, dtype=np.int64), 1),
                                                 pa.array(["a", "b", None]))


@pytest.fixture(scope="module")
def sites(tmp_path_factory):
    s = write_study(tmp_path_factory.mktemp("holdout"), 1500, seed=300)
    return s.dir, s.schema, s.data


@pytest.mark.parametrize("dp", [False, True])
def test_holdout_round_trip_certifies_the_models_error_on_the_held_out_rows(sites, dp):
    tmp, schema, data = sites
    tag = "dp" if dp else "exact"
    priv = ["--epsilon", "2", "--rounds", "1"] if dp else ["--stats", "all", "--min-cell", "1"]
    bundles = []
    for site, f in data.items():
        b = tmp / f"{site}-{tag}.bundle"
        r = run("export", f, "--schema", schema, "--site", site, "--out", b, "--holdout", "0.25",
                "--ledger", tmp / f"{site}-{tag}-ledger", *priv)
        assert r.exit_code == 0, r.output
        bundles.append(b)
    model = tmp / f"model-{tag}.json"
    r = run("learn", *bundles, "--out", model, "--allow-unsigned", "--learner", "mrc")
    assert r.exit_code == 0, r.output
    m = Model.load(model)
    evals, errors, held = [], 0, 0
    for site, f in data.items():
        ev = tmp / f"{site}-{tag}.eval"
        r = run("export", f, "--schema", schema, "--site", site, "--out", ev, "--evaluate", model, "--allow-unsigned",
                "--ledger", tmp / f"{site}-{tag}-ledger", *([] if not dp else ["--epsilon", "0.5", "--rounds", "1"]),
                *(["--min-cell", "1"] if not dp else []))
        assert r.exit_code == 0, r.output
        evals.append(ev)
        # the held-out rows, recomputed independently from the site's key: the training release never saw them
        enc = encode_file(f, m.codebook)
        mask = Splitter(Holdout(0.25), site_key(tmp / f"{site}-{tag}-ledger")).mask(enc)
        errors += int(np.sum(m.predict(enc.X[mask]) != enc.y[mask]))
        held += int(mask.sum())
    cert = tmp / f"cert-{tag}.json"
    r = run("certify", model, *evals, "--out", cert, "--allow-unsigned", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    back = Model.load(cert)
    assert (back.estimator.certificate_.kind == "holdout"
            and back.worst_case_error == pytest.approx(d["worst_case_error"]))
    if not dp:  # exact releases: the released counts are the true ones, the bound the one-sided Clopper-Pearson limit
        assert (d["errors"], d["rows"]) == (errors, held)
        # at the first model's share of α on its held-out set, 6/π² (issue 44)
        assert d["worst_case_error"] == pytest.approx(beta.ppf(1 - 0.05 * G1, errors + 1, held - errors), rel=1e-12)
    assert d["worst_case_error"] >= errors / held
    # the training tables exclude the held-out rows
    from marg.protocols.bundle import Bundle

    heads = [Bundle.from_bytes(b.read_bytes()).header for b in bundles]
    assert all(h["holdout"] == {"fraction": 0.25, "by": "rows"} for h in heads)
    if not dp:
        assert sum(h["n_rows"] for h in heads) == 3 * 1500 - held
    # the model card: the certificate's kind and promise in plain words, and each site's ε over both rounds
    from marg.reports.model_card import model_card
    from tests.helpers.reports import parse, values

    card = tmp / f"card-{tag}.html"
    card.write_text(model_card(back))
    root = parse(card)
    v = values(root)
    text = " ".join(root.itertext())
    assert float(v["certificate"]) == back.worst_case_error and v["certificate_kind"].startswith("holdout")
    assert "Error rate ≤" in text and "Worst-case error ≤" not in text and "never learned from them" in text
    for site, b, ev in zip(data, bundles, evals):
        train = Bundle.from_bytes(b.read_bytes()).header["privacy"]
        evaluation = Bundle.from_bytes(ev.read_bytes()).header["privacy"]
        assert float(v[f"site_epsilon:{site}"]) == pytest.approx(float(train["epsilon"]) + float(evaluation["epsilon"]))
        assert float(v[f"site_eval_epsilon:{site}"]) == pytest.approx(float(evaluation["epsilon"]))
        assert int(v[f"site_rounds:{site}"]) == 2
        if dp:
            assert float(evaluation["epsilon"]) == pytest.approx(0.5) and float(train["epsilon"]) == pytest.approx(2,
                                                                                                                   rel=1e-3)


def test_holdout_refusals(sites, tmp_path):
    tmp, schema, data = sites
    f = data["north"]
    led = tmp_path / "ledger"
    r = run("export", f, "--schema", schema, "--site", "north", "--out", tmp_path / "a.bundle", "--holdout", "0.2",
            "--no-ledger", "--stats", "first", "--min-cell", "1")
    assert r.exit_code == 2 and "--holdout needs the site's ledger folder" in r.stderr
    assert not (tmp_path / "a.bundle").exists()
    r = run("export", f, "--schema", schema, "--site", "north", "--out", tmp_path / "a.bundle", "--holdout", "1.5",
            "--ledger", led, "--min-cell", "1")
    assert r.exit_code == 2 and "--holdout must be a fraction in (0, 1), got 1.5" in r.stderr
    r = run("export", f, "--schema", schema, "--site", "north", "--out", tmp_path / "a.bundle", "--holdout-id",
            "patient_id", "--ledger", led, "--min-cell", "1")
    assert r.exit_code == 2 and "--holdout-id needs --holdout F" in r.stderr
    r = run("export", f, "--schema", schema, "--site", "north", "--out", tmp_path / "a.bundle", "--holdout", "0.2",
            "--ledger", led, "--min-cell", "1")
    assert r.exit_code == 0, r.output
    r = run("learn", tmp_path / "a.bundle", "--out", tmp_path / "m.json", "--allow-unsigned", "--learner", "nb")
    assert r.exit_code == 0, r.output
    ev = ("--evaluate", tmp_path / "m.json", "--allow-unsigned", "--ledger", led, "--min-cell", "1")
    # the data changed since the export: a held-out row is gone (the split is random with the site's key, so the
    # removed row is chosen among the held-out ones; removing only training rows leaves the evaluation valid)
    lines = f.read_text().splitlines()
    enc = encode_file(f, demo_codebook())
    mask = Splitter(Holdout(0.2), site_key(led)).mask(enc)
    k = int(np.flatnonzero(mask)[0]) + 1  # a held-out row (line k of the data, after the header)
    changed = tmp_path / "changed.csv"
    changed.write_text("\n".join(lines[:k] + lines[k + 1:]) + "\n")
    r = run("export", changed, "--schema", schema, "--site", "north", "--out", tmp_path / "e.eval", *ev)
    assert r.exit_code == 2 and "the data changed since the export" in r.stderr and not (tmp_path / "e.eval").exists()
    # the same number of rows, one of them edited: caught by the held-out rows' count or fingerprint. Identical rows
    # are told apart by their occurrence number, so an edit can leave the held-out multiset as it was (then the
    # evaluation is still of rows outside training, and nothing is refused): edit a row whose change moves it
    edited = tmp_path / "edited.csv"
    before = Splitter(Holdout(0.2), site_key(led))
    before.mask(enc)
    for k in np.flatnonzero(mask) + 1:
        cells = lines[k].split(",")
        cells[-1] = "yes" if cells[-1] == "no" else "no"
        edited.write_text("\n".join(lines[:k] + [",".join(cells)] + lines[k + 1:]) + "\n")
        after = Splitter(Holdout(0.2), site_key(led))
        after.mask(encode_file(edited, demo_codebook()))
        if (after.held, after.fingerprint) != (before.held, before.fingerprint):
            break
    else:
        pytest.fail("no single label flip changes the held-out rows")
    r = run("export", edited, "--schema", schema, "--site", "north", "--out", tmp_path / "e.eval", *ev)
    assert r.exit_code == 2 and "the data changed since the export" in r.stderr
    # the model learned from no bundle of another site
    r = run("export", f, "--schema", schema, "--site", "south", "--out", tmp_path / "e.eval", *ev)
    assert r.exit_code == 1 and "learned from no bundle of site 'south'" in r.stderr
    r = run("export", f, "--schema", schema, "--site", "north", "--out", tmp_path / "e.eval", *ev)
    assert r.exit_code == 0, r.output
    # certify refuses an evaluation of another model file
    other = tmp_path / "m2.json"
    other.write_bytes((tmp_path / "m.json").read_bytes() + b"\n")
    r = run("certify", other, tmp_path / "e.eval", "--out", tmp_path / "c.json", "--allow-unsigned")
    assert r.exit_code == 2 and "evaluates model" in r.stderr and not (tmp_path / "c.json").exists()
    # a training bundle is not an evaluation
    r = run("certify", tmp_path / "m.json", tmp_path / "a.bundle", "--out", tmp_path / "c.json", "--allow-unsigned")
    assert r.exit_code == 2 and "not an evaluation release" in r.stderr


# ------------------------------------------------------------------ issue 24's attack, through the console script
@pytest.fixture(scope="module")
def attack(tmp_path_factory):
    """Site north exports with --holdout 0.2 (bundle H), then again without it (bundle N), at ε = 1, same ledger;
    the learner signs a model learned from N and one learned from H."""
    tmp = tmp_path_factory.mktemp("attack")
    demo_codebook().save(tmp / "codebook.json")
    write_csv(tmp / "north.csv", generate(2000, SITES[0], seed=77), slice(0, 2000))
    for who in ("learner", "mallory"):  # both sign models: learner keys
        assert marg("keys", "init", "--site", who, "--role", "learner", "--dir", tmp / "keys", cwd=tmp).returncode == 0
    (tmp / "trust").mkdir()
    (tmp / "trust" / "learner.sign.pub").write_bytes((tmp / "keys" / "learner.sign.pub").read_bytes())
    common = ("--schema", "codebook.json", "--site", "north", "--ledger", "ledger", "--epsilon", "1", "--rounds", "1")
    for name, extra in (("H", ("--holdout", "0.2")), ("N", ())):
        r = marg("export", "north.csv", "--out", f"{name}.bundle", *common, *extra, cwd=tmp)
        assert r.returncode == 0, r.stderr
        r = marg("learn", f"{name}.bundle", "--out", f"model-{name}.json", "--allow-unsigned", "--learner", "nb",
                 "--sign-key", tmp / "keys" / "learner.sign.key", cwd=tmp)
        assert r.returncode == 0, r.stderr
    return tmp


def evaluate(tmp, model, *extra, out="north.eval"):
    return marg("export", "north.csv", "--schema", "codebook.json", "--site", "north", "--ledger", "ledger",
                "--min-cell", "1", "--out", out, "--evaluate", model, *extra, cwd=tmp)


def one_line_error(r, code: int, *words: str) -> None:
    lines = r.stderr.strip().splitlines()
    assert r.returncode == code and len(lines) == 1 and lines[0].startswith("marg: error:"), r.stderr
    assert all(w in lines[0] for w in words), lines[0]


def test_a_model_trained_on_the_rows_it_is_evaluated_on_is_refused_at_the_site(attack):
    """Issue 24's reproduction: the model learned from bundle N (every row), the site's --evaluate refuses."""
    tmp = attack
    r = evaluate(tmp, "model-N.json", "--trust", "trust", out="attack.eval")
    one_line_error(r, 1, "refused", "not exported with --holdout", "every row of it was in training")
    assert not (tmp / "attack.eval").exists()


def test_certify_refuses_an_evaluation_of_rows_the_model_learned_from(attack, tmp_path):
    """A site that skipped the site-side check (an older marg, or a doctored model) releases the confusion
    matrix of model N on H's held-out rows, naming H: ``marg certify`` compares the named bundle with
    the model's signed provenance and refuses — before, it printed 'error ≤ 0.2655'."""
    import shutil

    from marg.protocols.evaluation import evaluate_site, model_digest

    tmp = attack
    m = Model.load(tmp / "model-N.json")
    h_digest = Model.load(tmp / "model-H.json").info["sites"][0]["digest"]
    m.info = {**m.info, "sites": [{**m.info["sites"][0], "digest": h_digest, "rounds": [{"digest": h_digest}]}]}
    led = tmp_path / "ledger"
    shutil.copytree(tmp / "ledger", led)
    ev = tmp_path / "north.eval"
    evaluate_site(tmp / "north.csv", m, model_digest(tmp / "model-N.json"), "north", ev, min_cell=1, ledger_dir=led)
    r = marg("certify", "model-N.json", ev, "--out", tmp_path / "c.json", "--allow-unsigned", cwd=tmp)
    one_line_error(r, 1, "refused", "site 'north'", "may have been in training", h_digest[:12])
    assert not (tmp_path / "c.json").exists()


def test_a_model_trained_on_the_holdout_bundle_certifies(attack):
    tmp = attack
    r = evaluate(tmp, "model-H.json", "--trust", "trust")
    assert r.returncode == 0, r.stderr
    from marg.protocols.bundle import load_bundle

    head = load_bundle(tmp / "north.eval").header["evaluation"]
    h_digest = Model.load(tmp / "model-H.json").info["sites"][0]["digest"]
    assert head["signer"] == "learner" and head["split"] == {"bundles": [h_digest], "fraction": 0.2, "by": "rows"}
    r = marg("certify", "model-H.json", "north.eval", "--out", "certified.json", "--allow-unsigned", "--json", cwd=tmp)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["certificate"]["kind"] == "holdout" and d["rows"] > 300
    assert d["worst_case_error"] == pytest.approx(beta.ppf(1 - 0.05 * G1, d["errors"] + 1, d["rows"] - d["errors"]),
                                                  rel=1e-12)


def test_evaluate_verifies_the_model_before_predicting(attack):
    """An unsigned model, one without a trust store, one signed by a key the site does not trust, one
    altered after signing, one of another codebook: each refused in one line, nothing written."""
    import shutil

    from marg.marginals.data.codebook import Codebook

    tmp = attack
    d = json.loads((tmp / "model-H.json").read_text())
    d.pop("signature")
    (tmp / "unsigned.json").write_text(json.dumps(d))
    one_line_error(evaluate(tmp, "unsigned.json", "--trust", "trust", out="x.eval"), 1,
                   "unsigned.json refused: unsigned model")
    one_line_error(evaluate(tmp, "model-H.json", out="x.eval"), 1, "no trust store was given (--trust)")
    r = marg("learn", "H.bundle", "--out", "mallory.json", "--allow-unsigned", "--learner", "nb",
             "--sign-key", tmp / "keys" / "mallory.sign.key", cwd=tmp)
    assert r.returncode == 0, r.stderr
    one_line_error(evaluate(tmp, "mallory.json", "--trust", "trust", out="x.eval"), 1,
                   "mallory.json refused: signed by unknown key")
    d = json.loads((tmp / "model-H.json").read_text())
    d["info"]["sites"][0]["digest"] = "0" * 64  # provenance rewritten after signing
    (tmp / "tampered.json").write_text(json.dumps(d))
    one_line_error(evaluate(tmp, "tampered.json", "--trust", "trust", out="x.eval"), 1, "bad signature")
    cb = demo_codebook()
    Codebook(features=cb.features[:-1], label=cb.label).save(tmp / "other.json")
    shutil.copy(tmp / "north.csv", tmp / "north-copy.csv")
    r = marg("export", "north-copy.csv", "--schema", "other.json", "--site", "north", "--ledger", "ledger",
             "--out", "x.eval", "--evaluate", "model-H.json", "--trust", "trust", cwd=tmp)
    one_line_error(r, 2, "codebook")
    # with --allow-unsigned the unsigned model is evaluated (an experiment: nobody vouches for it)
    # (under DP: the held-out patients' one exact evaluation belongs to the certificate test)
    r = evaluate(tmp, "unsigned.json", "--allow-unsigned", "--epsilon", "1", out="x.eval")
    assert r.returncode == 0, r.stderr
    from marg.protocols.bundle import load_bundle

    assert load_bundle(tmp / "x.eval").header["evaluation"]["signer"] is None


def test_two_rounds_of_one_site_are_evaluated_on_the_rows_held_out_of_both(sites, tmp_path):
    """One key per site: round 2 (pair tables) with the same --holdout holds out the same rows as round 1, and
    the evaluation names both bundles; a round 2 with a smaller F holds out a subset, which is what is evaluated;
    a round 2 without --holdout leaves no row unseen, and --evaluate refuses."""
    from marg.protocols.bundle import load_bundle

    tmp, schema, data = sites
    f = data["north"]
    base = ("--schema", schema, "--site", "north", "--epsilon", "1", "--rounds", "1")
    enc = encode_file(f, demo_codebook())
    for case, round2 in (("same", ("--holdout", "0.2")), ("smaller", ("--holdout", "0.1")), ("none", ())):
        led, r1, r2 = tmp_path / f"led-{case}", tmp_path / f"{case}-1.bundle", tmp_path / f"{case}-2.bundle"
        assert run("export", f, *base, "--out", r1, "--ledger", led, "--stats", "first", "--holdout",
                   "0.2").exit_code == 0
        r = run("export", f, *base, "--out", r2, "--ledger", led, "--stats", "pairs-only", "--pairs", "age_band:sex",
                *round2)
        assert r.exit_code == 0, r.output
        model = tmp_path / f"{case}.json"
        r = run("learn", r1, r2, "--out", model, "--allow-unsigned", "--learner", "nb")
        assert r.exit_code == 0, r.output
        ev = tmp_path / f"{case}.eval"
        r = run("export", f, "--schema", schema, "--site", "north", "--out", ev, "--evaluate", model,
                "--allow-unsigned",
                "--ledger", led, "--min-cell", "1")
        if case == "none":
            assert r.exit_code == 1 and "not exported with --holdout" in r.stderr and not ev.exists()
            continue
        assert r.exit_code == 0, r.output
        head = load_bundle(ev).header
        digests = [load_bundle(b).digest() for b in (r1, r2)]
        assert sorted(head["evaluation"]["split"]["bundles"]) == sorted(digests)
        F = 0.2 if case == "same" else 0.1
        assert head["evaluation"]["split"]["fraction"] == F
        assert head["n_rows"] == int(Splitter(Holdout(F), site_key(led)).mask(enc).sum())
