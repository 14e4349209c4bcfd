"""The ledger's entry format: one canonical-JSON line per entry, hash-chained and signed.

Each entry (keys sorted, no spaces, UTF-8, one line) records one event at the site::

    v            format version (2; version-1 lines of older ledgers are read too)
    kind         "release" (statistics left the site) or "cap" (the dataset's budget cap set)
    seq          1, 2, 3, ... (line k holds seq k)
    time         UTC ISO-8601 time
    prev         sha256 hex of the previous entry's line (without "\\n"); 64 zeros for seq 1
    site         the site
    recipient    key id of the learner the bundle was sealed to, or null
    recipient_name  the learner's name as the site knows it, or null
    bundle       sha256 hex of the signed bundle's bytes (Bundle.digest()); null for "cap"
    file_sha256  sha256 hex of the file written (the sealed envelope), or null
    n_rows       the row count stated in the bundle (null if not released)
    statistics   [{name, kind, clique, shape, mechanism, std}] exactly as released (a select-then-measure
                 round 1 adds its selection: kind "selection", shape [k], the Gumbel noise's std)
    mechanism    "laplace" | "gaussian" | "none" | "mixed"
    cost         {epsilon, delta, rho} of this release ("inf" = exact, no DP guarantee); for a share of
                 shared noise under secure aggregation (marginals.shared_noise) the study's guarantee (the
                 secure sum of >= t survivors): the one charged against the cap
    own_cost     optional (written only for a shared-noise share): {epsilon, delta, rho} of the site's share
                 alone, its guarantee if every other party colluded with the learner; never charged
    cumulative   {epsilon, delta, rho} spent by all releases up to and including this one
    cap          {epsilon, delta, rho} the cap in force after this entry, or null
    source       where the site counted (Source.describe(): kind, location, table; never
                 credentials), or null
    round        the learner's round id the bundle answers (:mod:`protocols.rounds`), or null
    exact        for an exact release: {margin key: digest} of what it disclosed (the
                 differencing guard, :mod:`protocols.exact_releases`), else null
    suppressed   number of cells suppressed by the min-cell rule (where: only here, at the site)
    key_id       sha256 hex of the signing key, or null
    signature    base64 Ed25519 signature over the entry without "signature", or null

:func:`parse_entry` checks one line's form (canonical bytes, fields, types); the rules that
tie entries together (chain, sums, cap, rounds, exact releases) are in
:mod:`protocols.ledger_state`.
"""

from __future__ import annotations

import hashlib
import math
import re
from typing import Any, Mapping

from marg._util import canonical_json, parse_canonical
from marg.errors import InputError, MargError
from marg.marginals.accounting import PrivacyCost

LEDGER_FILE = "ledger.jsonl"
GENESIS = "0" * 64
ENTRY_VERSION = 2
KINDS = ("release", "cap")
HEX64 = re.compile(r"^[0-9a-f]{64}$")
ROUND_ID = re.compile(r"^[A-Za-z0-9_-]{1,128}$")

_OPT_STR = (str, type(None))
_FIELDS_V1: dict[str, Any] = {
    "v": int,
    "seq": int,
    "time": str,
    "prev": str,
    "site": str,
    "recipient": _OPT_STR,
    "recipient_name": _OPT_STR,
    "bundle": str,
    "file_sha256": _OPT_STR,
    "n_rows": (int, type(None)),
    "statistics": list,
    "mechanism": str,
    "cost": dict,
    "cumulative": dict,
    "cap": (dict, type(None)),
    "key_id": _OPT_STR,
    "signature": _OPT_STR,
}
_FIELDS_V2: dict[str, Any] = {
    **_FIELDS_V1,
    "kind": str,
    "bundle": _OPT_STR,
    "source": (dict, type(None)),
    "round": _OPT_STR,
    "exact": (dict, type(None)),
    "suppressed": int,
}
FIELDS = {1: _FIELDS_V1, 2: _FIELDS_V2}
OPTIONAL_FIELDS: dict[str, Any] = {"own_cost": dict}  # a v2 entry may hold these (absent: as before)


_PROBLEMS = {"UnicodeDecodeError": "not UTF-8 (corrupted)", "not an object": "not a JSON object",
             "not canonical": "not canonical JSON", "edited": "not in canonical form (edited)"}


def line_hash(line: bytes) -> str:
    """sha256 hex of one ledger line (without its ``"\\n"``): the next entry's ``prev``."""
    return hashlib.sha256(line).hexdigest()


def entry_signing_bytes(entry: Mapping[str, Any]) -> bytes:
    """Canonical JSON of ``entry`` without its ``signature`` field (what gets signed)."""
    return canonical_json({k: v for k, v in entry.items() if k != "signature"})


def kind_of(entry: Mapping[str, Any]) -> str:
    """The entry's kind (version-1 entries are all releases)."""
    return str(entry.get("kind", "release"))


def statistics_of(bundle: Any) -> list[dict[str, Any]]:
    """The ledger's list of released statistics from a bundle header.

    Returns
    -------
    list of dict
        ``{name, kind, clique, shape, mechanism, std}`` per statistic, in bundle order.
    """
    out = []
    for st in bundle.header.get("statistics") or []:
        noise = st.get("noise") or {}
        out.append(
            {
                "name": str(st.get("name")),
                "kind": str(st.get("kind", "counts")),
                "clique": [str(c) for c in st.get("clique") or []],
                "shape": [int(s) for s in st.get("shape") or []],
                "mechanism": str(noise.get("mechanism", "none")),
                "std": float(noise.get("std", 0.0)),
            }
        )
    sel = (bundle.header.get("study") or {}).get("selection") if isinstance(bundle.header.get("study"), dict) else None
    if isinstance(sel, dict):  # select-then-measure round 1: which features, chosen by OpenDP's noisy top-k
        k, p = int(sel.get("k", 0)), int(sel.get("candidates", 0))
        out.append({"name": f"top-{k} of {p} features (noisy top-k)", "kind": "selection", "clique": [],
                    "shape": [k], "mechanism": str(sel.get("mechanism", "noisy-top-k")),
                    "std": float(sel.get("scale", 0.0)) * math.pi / math.sqrt(6.0)})  # the Gumbel noise's std
    return out


def split_lines(data: bytes) -> tuple[list[bytes], bytes]:
    """Split ledger bytes into complete lines and a torn tail.

    A line is complete when it ends in ``"\\n"`` (the writer appends line and newline in
    one write and fsyncs it before anything else happens). An unterminated tail is a torn
    write of a crashed append: it was never an entry.

    Returns
    -------
    lines : list of bytes
        The entry lines, without their ``"\\n"``.
    tail : bytes
        The torn tail (empty for a well-formed file).
    """
    parts = bytes(data).split(b"\n")
    return parts[:-1], parts[-1]


def parse_entry(line: bytes, where: str = "ledger entry") -> dict[str, Any]:
    """Parse and type-check one ledger line; :class:`InputError` naming ``where`` if bad.

    The line must be the canonical JSON of its object (so any byte edit that keeps valid
    JSON is still caught), with every field of its version and the right types.
    """
    obj, problem = parse_canonical(line)
    if problem is not None:
        raise InputError(f"{where}: {_PROBLEMS.get(problem, 'not valid JSON (truncated or corrupted)')}")
    version = obj.get("v")
    if not isinstance(version, int) or isinstance(version, bool) or version not in FIELDS:
        raise InputError(f"{where}: unsupported entry version {version!r}")
    fields = FIELDS[version]
    optional = {k: t for k, t in OPTIONAL_FIELDS.items() if k in obj and version >= 2}
    if set(obj) - set(optional) != set(fields):
        extra = sorted((set(obj) - set(optional)) ^ set(fields))
        raise InputError(f"{where}: unexpected or missing field {extra[0]!r}")
    for k, typ in {**fields, **optional}.items():
        v = obj[k]
        if isinstance(v, bool) or not isinstance(v, typ):
            raise InputError(f"{where}: field {k!r} has the wrong type ({type(v).__name__})")
    if not isinstance(obj.get("kind", "release"), str) or kind_of(obj) not in KINDS:
        raise InputError(f"{where}: unknown entry kind {obj['kind']!r}")
    if kind_of(obj) == "release" and obj["bundle"] is None:
        raise InputError(f"{where}: a release entry needs a bundle digest")
    if not HEX64.match(obj["prev"]):
        raise InputError(f"{where}: field 'prev' is not a sha256 hex digest")
    for k in ("bundle", "file_sha256", "key_id"):
        if obj[k] is not None and not HEX64.match(obj[k]):
            raise InputError(f"{where}: field {k!r} is not a sha256 hex digest")
    try:
        for k in ("cost", "cumulative") + (("cap",) if obj["cap"] is not None else ()) + tuple(optional):
            PrivacyCost.from_dict(obj[k])
    except MargError as exc:
        raise InputError(f"{where}: bad privacy field ({exc})") from None
    for st in obj["statistics"]:
        if not isinstance(st, dict) or not isinstance(st.get("name"), str) or not isinstance(st.get("clique"), list):
            raise InputError(f"{where}: malformed statistics list")
    if version >= 2:
        _check_v2(obj, where)
    return obj


def _check_v2(obj: dict[str, Any], where: str) -> None:
    if obj["round"] is not None and not ROUND_ID.match(obj["round"]):
        raise InputError(f"{where}: malformed round id")
    exact = obj["exact"]
    if exact is not None and not all(isinstance(k, str) and isinstance(v, str) for k, v in exact.items()):
        raise InputError(f"{where}: malformed exact-release digests")
    if obj["suppressed"] < 0:
        raise InputError(f"{where}: negative suppressed-cell count")
