"""Command-line conventions of the installed ``marg`` (issue 26), run as a subprocess.

``--version``; shell completion; one-line ``marg: error:`` usage errors with exit 2; no odd
metavars in any help page; ``--json`` on every reporting command (stdout is one JSON object);
learner options grouped so ``marg learn --help`` reads one learner at a time; progress that
is live on a terminal and one summary line otherwise; models signed by default with the
configured learner key, and one line when a model is written unsigned.
"""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
from pathlib import Path

import pytest

import marg
from marg.marginals.synthetic import SITES, demo_codebook
from tests.helpers.console import marg as run, marg_exe


@pytest.fixture(scope="module")
def study(demo_study, tmp_path_factory) -> dict:
    """The session's demo study (three sites' rows and exact bundles, every pair table) and this
    module's own site configuration folder."""
    return {"dir": demo_study.dir, "schema": demo_study.schema, "bundles": demo_study.bundles,
            "data": demo_study.data[SITES[0].name],
            "env": {"MARG_HOME": str(tmp_path_factory.mktemp("conventions") / "home")}}


def test_version_and_completion(tmp_path):
    r = run("--version", cwd=tmp_path)
    assert r.returncode == 0 and r.stdout.strip() == f"marg {marg.__version__}"
    r = run("--show-completion", "bash", cwd=tmp_path, env={"SHELL": "/bin/bash"})
    assert r.returncode == 0 and "_MARG_COMPLETE" in r.stdout and "complete" in r.stdout
    # the completion script works: asking it for `marg exp<TAB>` answers export
    env = {"_MARG_COMPLETE": "complete_bash", "COMP_WORDS": "marg exp", "COMP_CWORD": "1"}
    r = run(cwd=tmp_path, env=env)
    assert "export" in r.stdout.split()


@pytest.mark.parametrize("args, says", [
    (["export", "x.csv", "--schema", "s.json"], "export: missing option '--site'"),
    (["learn", "b.bundle", "--out", "m.json", "--coverage", "abc"], "learn: invalid value for '--coverage'"),
    (["learn", "--bogus"], "learn: no such option: --bogus"),
    (["predict"], "predict: missing argument"),
    (["nosuchcommand"], "no such command 'nosuchcommand'"),
    (["schema", "init", "d.csv", "--out", "c.json"], "schema init: missing option '--label'"),
    (["audit", "show", "--ledger"], "option '--ledger' requires an argument"),
], ids=lambda a: a[0] if isinstance(a, list) else None)
def test_usage_errors_are_one_line_exit_2(tmp_path, args, says):
    r = run(*args, cwd=tmp_path)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("marg: error: "), r.stderr
    assert says in r.stderr and r.stdout == ""


def _help_pages(tmp_path: Path, prefix: tuple[str, ...] = ()) -> dict[tuple[str, ...], str]:
    """Every command path of ``marg`` and its help page (each read once, through the console script)."""
    r = run(*prefix, "--help", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    pages = {prefix: r.stdout}
    if "Commands:" not in r.stdout:
        return pages
    names = [ln.split()[0] for ln in r.stdout.split("Commands:", 1)[1].splitlines() if ln.startswith("  ")
             and ln.split()]
    for n in names:
        pages.update(_help_pages(tmp_path, (*prefix, n)))
    return pages


def test_no_odd_metavars_in_any_help(tmp_path):
    pages = _help_pages(tmp_path)
    assert ("learn",) in pages and ("schema", "init") in pages and len(pages) > 20
    for cmd, text in pages.items():
        odd = re.findall(r"\{[A-Za-z_]+\}|<[a-z][a-z\[\]_|]*>", text)
        assert not odd, (cmd, odd)


def _sections(help_text: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    cur = None
    for ln in help_text.splitlines():
        if ln and not ln.startswith(" ") and ln.endswith(":"):
            cur = ln[:-1]
            out[cur] = []
        elif cur is not None and ln.strip():
            out[cur].append(ln)
    return out


def test_learn_help_reads_one_learner_at_a_time(tmp_path):
    sec = _sections(run("learn", "--help", cwd=tmp_path).stdout)
    opts = lambda name: {ln.split()[0] for ln in sec[name] if ln.startswith("  --")}  # noqa: E731  (an option's row)
    assert {"--kappa", "--max-order", "--patience", "--stall-tol"} <= opts("Boost (--learner boost)")
    assert {"--solver", "--eps", "--n-max", "--k-max"} <= opts("MRC (--learner mrc)")
    assert {"--greedy", "--structure", "--loss", "--edge-weight", "--max-edges"} <= opts("DCC (--learner dcc)")
    assert "--ridge" in opts("Rényi (--learner renyi)") and "--alpha" in opts("Naive Bayes (--learner nb)")
    specific = set().union(*(opts(n) for n in sec if n not in ("Options", "Arguments")))
    assert not (opts("Options") & specific)
    for name in sec:  # the common options plus one learner's fit one 50-line screen
        if name.endswith("boost)") or name.endswith("mrc)") or name.endswith("dcc)"):
            assert len(sec["Options"]) + len(sec[name]) <= 50, (name, len(sec["Options"]), len(sec[name]))


def test_every_reporting_command_speaks_json(study, tmp_path):
    s, d = study, study["dir"]
    env = {**s["env"], "MARG_PROGRESS": "auto"}

    def one_json(*args) -> dict:
        r = run(*args, cwd=d, env=env)
        assert r.returncode == 0, (args, r.stderr)
        return json.loads(r.stdout)  # the whole of stdout is one JSON object

    model = tmp_path / "m.json"
    assert one_json("learn", *s["bundles"], "--learner", "mrc", "--out", model, "--json", "--allow-unsigned",
                    "--no-sign")["learner"] == "mrc"
    assert one_json("export", s["data"], "--schema", s["schema"], "--site", "north", "--out", tmp_path / "e.bundle",
                    "--stats", "first", "--min-cell", "1", "--no-ledger", "--json")["n_rows"] == 400
    assert one_json("export", s["data"], "--schema", s["schema"], "--site", "north", "--out", tmp_path / "e.bundle",
                    "--epsilon", "1", "--no-ledger", "--dry-run", "--json")["dry_run"] is True
    p = one_json("predict", model, s["data"], "--out", tmp_path / "p.csv", "--schema", s["schema"], "--allow-unsigned",
                 "--json")
    assert p["n"] == 400 and len((tmp_path / "p.csv").read_text().splitlines()) == 401
    rep = one_json("report", model, "--out", tmp_path / "card.html", "--allow-unsigned", "--json", "--data", s["data"],
                   "--schema", s["schema"])
    assert rep["evaluated_on"]["n"] == 400 and (tmp_path / "card.html").exists()
    j = one_json("schema", "init", s["data"], "--label", demo_codebook().label.name, "--out", tmp_path / "cb.json",
                 "--json")
    assert j["features"] == [f["name"] for f in json.loads((tmp_path / "cb.json").read_text())["features"]]
    assert run("keys", "init", "--site", "learner", "--role", "learner", "--dir", tmp_path / "lk",
               cwd=d).returncode == 0
    assert one_json("round", "--schema", s["schema"], "--out", tmp_path / "r.json", "--sign-key",
                    tmp_path / "lk" / "learner.sign.key", "--json")["round"]
    assert one_json("keys", "trust", *_a_key(tmp_path), "--json")["added"] is True


def _a_key(tmp_path: Path) -> list:
    r = run("keys", "init", "--site", "west", "--dir", tmp_path / "k", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    return [tmp_path / "k" / "west.sign.pub", "--trust", tmp_path / "trust"]


def test_progress_is_one_summary_line_off_a_terminal_and_live_on_one(study):
    s, d = study, study["dir"]
    args = ["learn", *s["bundles"], "--learner", "dcc", "--greedy", "--s", "0", "--out", d / "g.json",
            "--allow-unsigned", "--no-sign"]
    # steps shorter than MARG_PROGRESS_AFTER write no summary line (an hour: however loaded the machine)
    quick = run(*args, cwd=d, env={**s["env"], "MARG_PROGRESS_AFTER": "3600"})
    assert quick.returncode == 0 and not any(ln.startswith(("bundles verified", "learn dcc:"))
                                             for ln in quick.stderr.splitlines())
    s = {**s, "env": {**s["env"], "MARG_PROGRESS_AFTER": "0"}}  # summarise even these quick steps
    r = run(*args, cwd=d, env=s["env"])
    assert r.returncode == 0, r.stderr
    prog = [ln for ln in r.stderr.splitlines() if ln.startswith(("bundles verified", "learn dcc:"))]
    assert len(prog) == 2 and "3 of 3" in prog[0] and "greedy: edge" in prog[1] and "best bound R = " in prog[1]
    assert not any(ln.startswith("  greedy: edge") for ln in r.stderr.splitlines())  # no per-step lines in a log
    lines = run(*args, cwd=d, env={**s["env"], "MARG_PROGRESS": "lines"}).stderr
    assert sum(ln.startswith("  greedy: edge ") for ln in lines.splitlines()) >= 1
    # on a terminal: rich draws the live line (spinner, current step, elapsed time) on stderr
    master, slave = pty.openpty()
    env = {**os.environ, **s["env"], "TERM": "xterm", "COLUMNS": "120"}
    env.pop("MARG_PROGRESS", None)
    p = subprocess.Popen([marg_exe(), *map(str, args)], cwd=d, env=env, stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    seen = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    p.wait(timeout=300)
    os.close(master)
    text = seen.decode("utf-8", "replace")
    assert p.returncode == 0
    # a live (cursor-controlled) line with the current step
    assert "\x1b[" in text and "learn dcc: greedy: edge" in text
    assert "best bound R = " in text  # then the summary line


def test_models_are_signed_by_default_with_the_configured_key(study, tmp_path):
    s, d = study, study["dir"]
    home = tmp_path / "home"
    env = {"MARG_HOME": str(home)}
    # no key configured: the model is written, with one line saying it is unsigned; sites refuse it
    r = run("learn", *s["bundles"], "--learner", "nb", "--out", tmp_path / "u.json", "--allow-unsigned", cwd=d, env=env)
    assert r.returncode == 0, r.stderr
    note = [ln for ln in r.stderr.splitlines() if "is unsigned" in ln]
    assert len(note) == 1 and "--sign-key" in note[0]
    r = run("predict", tmp_path / "u.json", s["data"], "--out", tmp_path / "p.csv", "--schema", s["schema"],
            "--trust", tmp_path / "trust", cwd=d, env=env)
    assert r.returncode == 1
    # the learner's key in $MARG_HOME/keys: signed without --sign-key, and a site with its public key accepts it
    assert run("keys", "init", "--site", "learner", "--role", "learner", "--dir", home / "keys", cwd=d).returncode == 0
    r = run("learn", *s["bundles"], "--learner", "nb", "--out", tmp_path / "s.json", "--allow-unsigned", cwd=d, env=env)
    assert r.returncode == 0 and "is unsigned" not in r.stderr and "signed by learner" in r.stdout, r.stderr
    assert run("keys", "trust", home / "keys" / "learner.sign.pub", "--trust", tmp_path / "trust", "--role", "learner",
               cwd=d).returncode == 0
    r = run("predict", tmp_path / "s.json", s["data"], "--out", tmp_path / "p.csv", "--schema", s["schema"],
            "--trust", tmp_path / "trust", cwd=d, env=env)
    assert r.returncode == 0, r.stderr
    # --no-sign: unsigned on purpose, still said
    r = run("learn", *s["bundles"], "--learner", "nb", "--out", tmp_path / "n.json", "--allow-unsigned", "--no-sign",
            cwd=d, env=env)
    assert r.returncode == 0 and "is unsigned" in r.stderr
