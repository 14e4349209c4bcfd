"""A secure-aggregation round on files, dropout-tolerant: round → uploads → request → reveals → sum.

The learner never sees one site's table, only the sum over the sites that uploaded, and the
round survives up to ``n − t`` sites dropping out (:mod:`protocols.secagg` for the masking
maths, :mod:`protocols.shamir` for the sharing). Every file is canonical JSON signed with
Ed25519 (``key_id``, ``signature`` over the document with ``signature`` null):

1. **Round** (learner, ``marg secagg start``): a fresh 128-bit id, the study's codebook
   fingerprint, the tables to release (``stats``, ``pairs``), the threshold ``t`` and the
   roster — every site's name, Ed25519 key (to check its files) and X25519 key (to agree on
   pairwise masks and to receive shares). Signed by the learner; sites check it against their
   trust store of learner keys.
2. **Upload** (each site, ``marg secagg submit``): the site's tables (DP noise added first),
   masked with a fresh self mask and the pairwise masks of the roster, plus, for every site
   of the roster, a sealed envelope (:mod:`protocols.sealing`) holding that site's Shamir
   shares of the self-mask seed and of each pairwise seed, signed by the dealer inside the
   envelope. The site's ledger records the release under the round id; a site answers a
   round once.
3. **Request** (learner, ``marg secagg collect``): the survivors ``U`` — the sites whose
   uploads verified (at least ``t``) — and, for each survivor, the envelopes addressed to it.
   Signed by the learner: the dropped sites are recorded.
   Each site checks the roster against its own pinned list of study members, signing **and**
   sealing keys (:func:`check_roster`, :mod:`protocols.pinning`): a pinned site under another key
   is refused, and a roster with fewer than ``t`` fully pinned sites (Sybil keys of the learner,
   or sealing keys it holds) is refused before anything is sealed.
4. **Reveal** (each surviving site, ``marg secagg reveal``): the site opens its envelopes,
   checks each dealer's signature, and reveals its shares of ``b_i`` for ``i ∈ U`` and of
   ``k_ij`` for ``i ∈ U, j ∉ U`` — never of both for one site. It reveals for one request
   per round only (a second request with another survivor set would let the learner collect
   both kinds of shares), remembered in the ledger that recorded its upload (:func:`reveal_once`).
5. **Sum** (learner, ``marg secagg finish``): with ``t`` reveals it rebuilds those seeds,
   removes the self masks and the dangling pairwise masks and decodes the sum
   (:func:`finish`), which it writes as a bundle signed with its own key.
"""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
from cryptography.hazmat.primitives.asymmetric import ed25519, x25519

from marg._util import atomic_write_bytes, canonical_json, read_json_file
from marg.errors import InputError, MargError, RefusedError
from marg.marginals.counts.noise import NoiseRecord
from marg.marginals.counts.tables import MarginalTable

from . import shamir
from .keys import SEAL_PUB_SUFFIX, SIGN_PUB_SUFFIX, key_id, load_seal_public_key, load_verify_key
from .pinning import PinnedKeys, check_pinned_roster, check_pinned_survivors
from .trust_store import TrustStore
from .keys import public_bytes, short_id, validate_site_name
from .sealing import open_sealed, seal
from .secagg import pair_seed, recover_sum
from .secagg_tables import MaskedTables, check_layouts, decode_tables, mask_tables
from .signing import b64, check_role, document_signed_by, sign_document, unb64

ROUND_FORMAT = "marg-secagg-round"
UPLOAD_FORMAT = "marg-secagg-upload"
SHARES_FORMAT = "marg-secagg-shares"
REQUEST_FORMAT = "marg-secagg-request"
REVEAL_FORMAT = "marg-secagg-reveal"
FRACTIONAL_BITS = 16
SELF = "b"


# ---------------------------------------------------------------------------------------
# signed documents
# ---------------------------------------------------------------------------------------
def _signed(doc: dict[str, Any], key: ed25519.Ed25519PrivateKey) -> dict[str, Any]:
    return sign_document(doc, key)


def _check_signature(doc: Mapping[str, Any], pub: ed25519.Ed25519PublicKey, name: str) -> None:
    if doc.get("key_id") != key_id(pub):
        raise RefusedError(f"{name} refused: signed by key {str(doc.get('key_id'))[:16]!r}, expected "
                           f"{short_id(key_id(pub))}")
    if not document_signed_by(doc, pub):
        raise RefusedError(f"{name} refused: bad signature (altered)")


def write_doc(doc: Mapping[str, Any], path: str | os.PathLike[str]) -> None:
    """Write a round document atomically (canonical JSON)."""
    atomic_write_bytes(Path(path), canonical_json(dict(doc)) + b"\n")


def read_doc(path: str | os.PathLike[str], fmt: str) -> dict[str, Any]:
    """A round document of format ``fmt``; one-line InputError if missing or not one."""
    p = Path(path)
    d = read_json_file(p, fmt)
    if not isinstance(d, dict) or d.get("format") != fmt or d.get("version") != 1:
        raise InputError(f"{p}: not a {fmt} file")
    return d


# ---------------------------------------------------------------------------------------
# the round
# ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Member:
    """One site of a round's roster; ``index`` (1-based) is its Shamir abscissa."""

    site: str
    index: int
    sign_pub: ed25519.Ed25519PublicKey
    seal_pub: x25519.X25519PublicKey


@dataclass(frozen=True)
class SecureRound:
    """A verified round file (see the module docstring)."""

    id: str
    fingerprint: str
    threshold: int
    members: tuple[Member, ...]
    learner: str
    learner_key: ed25519.Ed25519PublicKey
    stats: str
    pairs: tuple[tuple[str, str], ...] | None

    def member(self, site: str, what: str = "round") -> Member:
        for m in self.members:
            if m.site == site:
                return m
        raise RefusedError(f"site {site!r} is not in {what} {self.id}'s roster ({', '.join(self.names)})")

    @property
    def names(self) -> list[str]:
        return [m.site for m in self.members]


def start_round(
    roster: str | os.PathLike[str],
    sites: Sequence[str],
    fingerprint: str,
    learner_key: ed25519.Ed25519PrivateKey,
    learner: str,
    threshold: int | None = None,
    stats: str = "first",
    pairs: Sequence[tuple[str, str]] | None = None,
) -> dict[str, Any]:
    """A new round document (fresh id), signed by the learner.

    Parameters
    ----------
    roster : folder holding ``SITE.sign.pub`` and ``SITE.seal.pub`` for every site
    sites : the sites of the round (at least 2)
    fingerprint : the study codebook's fingerprint
    learner_key, learner : the learner's signing key and name
    threshold : sites needed to finish (default and least ``⌊n/2⌋ + 1``: with fewer, a learner
        could ask two halves of the sites about two different survivor sets and unmask one
        site); up to ``n − t`` may drop out
    stats, pairs : the tables every site releases (as ``marg export --stats/--pairs``)
    """
    names = list(dict.fromkeys(sites))
    if len(names) < 2:
        raise InputError(f"a secure round needs at least two sites, got {len(names)}")
    for s in names:
        validate_site_name(s)
    t = len(names) // 2 + 1 if threshold is None else int(threshold)
    if not len(names) // 2 < t <= len(names):
        raise InputError(f"--threshold must be more than half the sites and at most all of them "
                         f"({len(names) // 2 + 1}..{len(names)}), got {t}")
    d = Path(roster)
    members = []
    for s in sorted(names):
        sign, seal_ = load_verify_key(d / f"{s}{SIGN_PUB_SUFFIX}"), load_seal_public_key(d / f"{s}{SEAL_PUB_SUFFIX}")
        members.append({"site": s, "sign_pub": b64(public_bytes(sign)), "seal_pub": b64(public_bytes(seal_))})
    doc = {"format": ROUND_FORMAT, "version": 1, "id": secrets.token_hex(16), "fingerprint": str(fingerprint),
           "threshold": t, "members": members, "learner": learner, "stats": stats,
           "pairs": [list(p) for p in pairs] if pairs else None}
    return _signed(doc, learner_key)


def parse_round(d: Mapping[str, Any], trust: TrustStore | None = None,
                learner_pub: ed25519.Ed25519PublicKey | None = None,
                fingerprint: str | None = None, name: str = "round") -> SecureRound:
    """Verify a round document against the learner's key (``learner_pub``, or found in ``trust``)."""
    try:
        members = []
        for i, m in enumerate(d["members"], 1):
            sp, cp = unb64(m["sign_pub"], 32), unb64(m["seal_pub"], 32)
            if sp is None or cp is None:
                raise ValueError
            members.append(Member(validate_site_name(m["site"]), i, ed25519.Ed25519PublicKey.from_public_bytes(sp),
                                  x25519.X25519PublicKey.from_public_bytes(cp)))
        rid, t, learner = str(d["id"]), int(d["threshold"]), str(d["learner"])
        pairs = None if d.get("pairs") is None else tuple((str(a), str(b)) for a, b in d["pairs"])
        stats = str(d["stats"])
    except (KeyError, TypeError, ValueError, InputError):
        raise InputError(f"{name}: malformed round") from None
    if len({m.site for m in members}) != len(members) or not len(members) // 2 < t <= len(members) or len(rid) != 32:
        raise InputError(f"{name}: malformed round (roster, threshold or id)")
    if learner_pub is None:
        if trust is None:
            raise RefusedError(f"{name} refused: give the trust store of learner keys (--trust) to check who issued it")
        found = trust.lookup(str(d.get("key_id")))
        if found is None or found[0] != learner:
            raise RefusedError(f"{name} refused: issued by key {str(d.get('key_id'))[:16]!r} ({learner!r}), not a "
                               f"learner in trust store {trust.directory}")
        check_role(trust, str(d.get("key_id")), learner, "learner", name)
        learner_pub = found[1]
    _check_signature(d, learner_pub, name)
    if fingerprint is not None and d.get("fingerprint") != fingerprint:
        raise InputError(f"{name}: the round is for codebook {str(d.get('fingerprint'))[:16]!r}…, not "
                         f"{fingerprint[:16]}…")
    return SecureRound(rid, str(d["fingerprint"]), t, tuple(members), learner, learner_pub, stats, pairs)


def _keys(rnd: SecureRound, names: Sequence[str]) -> dict[str, tuple[ed25519.Ed25519PublicKey, x25519.X25519PublicKey]]:
    return {n: (rnd.member(n).sign_pub, rnd.member(n).seal_pub) for n in names}


def check_roster(rnd: SecureRound, members: PinnedKeys, site: str, name: str = "round") -> list[str]:
    """Refuse a roster with fewer than ``t`` sites whose signing **and** sealing keys this site pinned.

    ``members`` is the site's own list of the study's sites (a folder of ``SITE.sign.pub`` and
    ``SITE.seal.pub``, ``marg keys trust``; or a study file's keys): :func:`protocols.pinning.check_pinned_roster`.
    A learner that slips ``s`` keys of its own into the roster (Sybils) holds their shares: with
    ``s ≥ t`` it rebuilds a site's self-mask seed, computes its pairwise masks with the Sybils, and
    reads that site's exact table. A roster that lists the other sites' real signing keys beside
    sealing keys of the learner's own is the same attack with no Sybil: every share is sealed to
    the learner. A pinned name under any other key is refused, this site's own entry included;
    with at least ``t`` fully pinned sites, ``s ≤ n − t < t`` (``t > n/2``). Runs before anything
    is sealed; returns the pinned members.
    """
    return check_pinned_roster(_keys(rnd, rnd.names), members, site, rnd.threshold, name)


def check_survivors(rnd: SecureRound, members: PinnedKeys, site: str, survivors: Sequence[str],
                    name: str = "request") -> list[str]:
    """Refuse to reveal unless at least ``t − 1`` pinned study members, other than this site, survived.

    The roster check (:func:`check_roster`) counts members in the roster; the learner then
    chooses who "dropped out". Declaring honest sites dropped leaves survivors of which the
    learner's own keys (Sybils) may make up all but this site: its reveal then gives the
    learner this site's self-mask seed (``t`` shares with the Sybils'), and the sum minus the
    Sybils' own tables is this site's table with only its own noise. With ``t − 1`` pinned
    others among the survivors, the Sybils hold at most ``n − t < t`` shares of any seed
    (:func:`protocols.pinning.check_pinned_survivors`).
    """
    return check_pinned_survivors(_keys(rnd, survivors), members, site, rnd.threshold, name)


def reveal_once(ledger: Any, rnd: SecureRound, site: str) -> Path:
    """Mark round ``rnd`` revealed in the site's ledger (verified, the one its upload was recorded in); return the
    marker.

    Refuses a ledger that does not record this site's upload for the round (``--ledger
    elsewhere``: a fresh folder would forget an earlier reveal) and a second reveal (another
    request, e.g. one marking another survivor set, would give the learner both kinds of shares
    of one site and unmask it).
    """
    ledger.state()  # refuses a missing, truncated, rolled-back or re-signed ledger
    if not any(e.get("round") == rnd.id and e.get("site") == site for e in ledger.entries()):
        raise RefusedError(f"ledger {ledger.directory} records no upload of site {site!r} for round {rnd.id}: reveal "
                           "with the ledger that recorded the submission")
    return ledger.mark_round(f"{rnd.id}-reveal")


# ---------------------------------------------------------------------------------------
# uploads
# ---------------------------------------------------------------------------------------
def _layout(tables: Sequence[MarginalTable]) -> list[dict[str, Any]]:
    return [{"clique": list(t.clique), "kind": t.kind, "shape": list(t.shape), "noise": t.noise.to_dict()}
            for t in tables]


def make_upload(rnd: SecureRound, site: str, tables: Sequence[MarginalTable], seal_key: x25519.X25519PrivateKey,
                sign_key: ed25519.Ed25519PrivateKey, privacy: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A site's upload: its masked tables and the sealed shares of its seeds, signed.

    Raises RefusedError if the site or its keys are not the roster's.
    """
    me = rnd.member(site)
    if public_bytes(seal_key) != public_bytes(me.seal_pub) or key_id(sign_key) != key_id(me.sign_pub):
        raise RefusedError(f"site {site!r}: the given keys are not the ones round {rnd.id} lists for it")
    peers = {m.site: m.seal_pub for m in rnd.members if m.site != site}
    seeds = {SELF: os.urandom(32)}
    for p, pub in peers.items():
        a, b = sorted((site, p))
        seeds[f"k:{p}"] = pair_seed(seal_key, pub, a, b, rnd.id)
    n = len(rnd.members)
    shares = {name: shamir.split(s, n, rnd.threshold) for name, s in seeds.items()}
    envelopes = {}
    for m in rnd.members:
        body = {"format": SHARES_FORMAT, "version": 1, "round": rnd.id, "dealer": site, "holder": m.site,
                "shares": {name: shamir.share_hex(v[m.index - 1]) for name, v in shares.items()}}
        envelopes[m.site] = b64(seal(canonical_json(_signed(body, sign_key)), m.seal_pub))
    masked = mask_tables(site, tables, seal_key, peers, rnd.id, FRACTIONAL_BITS, self_seed=seeds[SELF])
    doc = {"format": UPLOAD_FORMAT, "version": 1, "round": rnd.id, "site": site, "layout": _layout(tables),
           "fractional_bits": FRACTIONAL_BITS, "privacy": dict(privacy) if privacy else None,
           "vector": b64(np.ascontiguousarray(masked.vector, dtype="<u8").tobytes()), "shares": envelopes}
    return _signed(doc, sign_key)


@dataclass(frozen=True)
class Upload:
    masked: MaskedTables
    envelopes: dict[str, str]
    privacy: dict[str, Any] | None


def parse_upload(d: Mapping[str, Any], rnd: SecureRound, name: str = "upload") -> Upload:
    """Verify a site's upload (its roster key, the round, a well-formed layout and vector)."""
    site = d.get("site")
    me = rnd.member(str(site), "round") if isinstance(site, str) else None
    if me is None:
        raise InputError(f"{name}: malformed upload (no site)")
    _check_signature(d, me.sign_pub, name)
    if d.get("round") != rnd.id:
        raise RefusedError(f"{name} refused: for round {str(d.get('round'))[:12]!r}…, not {rnd.id[:12]}… (replayed)")
    try:
        layout = tuple((tuple(str(a) for a in x["clique"]), str(x["kind"]), tuple(int(v) for v in x["shape"]),
                        NoiseRecord.from_dict(x["noise"])) for x in d["layout"])
        raw = unb64(d["vector"])
        bits = int(d["fractional_bits"])
        envelopes = {str(k): str(v) for k, v in dict(d["shares"]).items()}
    except (KeyError, TypeError, ValueError, MargError):
        raise InputError(f"{name}: malformed upload") from None
    size = sum(int(np.prod(s, dtype=np.int64)) for _, _, s, _ in layout)
    if raw is None or len(raw) != 8 * size or set(envelopes) != set(rnd.names):
        raise InputError(f"{name}: malformed upload (vector length or share envelopes)")
    vec = np.frombuffer(raw, dtype="<u8").astype(np.uint64)
    privacy = d.get("privacy") if isinstance(d.get("privacy"), dict) else None
    return Upload(MaskedTables(me.site, rnd.id, layout, bits, vec), envelopes, privacy)


# ---------------------------------------------------------------------------------------
# request and reveals
# ---------------------------------------------------------------------------------------
def make_request(rnd: SecureRound, uploads: Sequence[Upload], learner_key: ed25519.Ed25519PrivateKey) -> dict[str, Any]:
    """The learner's request: the survivors and, for each, the envelopes addressed to it."""
    check_layouts([u.masked for u in uploads])
    survivors = sorted(u.masked.site for u in uploads)
    if len(survivors) < rnd.threshold:
        raise RefusedError(f"round {rnd.id}: {len(survivors)} of {len(rnd.members)} sites uploaded, the threshold is "
                           f"{rnd.threshold}: the sum cannot be recovered")
    dropped = [s for s in rnd.names if s not in survivors]
    envelopes = {h: {u.masked.site: u.envelopes[h] for u in uploads} for h in survivors}
    doc = {"format": REQUEST_FORMAT, "version": 1, "round": rnd.id, "survivors": survivors, "dropped": dropped,
           "shares": envelopes}
    return _signed(doc, learner_key)


def parse_request(d: Mapping[str, Any], rnd: SecureRound, name: str = "request") -> tuple[list[str], list[str]]:
    """Verify the learner's request; return (survivors, dropped)."""
    _check_signature(d, rnd.learner_key, name)
    if d.get("round") != rnd.id:
        raise RefusedError(f"{name} refused: for round {str(d.get('round'))[:12]!r}…, not {rnd.id[:12]}…")
    surv, drop = d.get("survivors"), d.get("dropped")
    if (not isinstance(surv, list) or not isinstance(drop, list) or sorted(surv + drop) != sorted(rnd.names)
            or len(set(surv)) != len(surv)):
        raise RefusedError(f"{name} refused: survivors and dropped sites do not partition the roster")
    if len(surv) < rnd.threshold:
        raise RefusedError(f"{name} refused: {len(surv)} survivors, below the threshold {rnd.threshold}")
    return [str(s) for s in surv], [str(s) for s in drop]


def make_reveal(rnd: SecureRound, request: Mapping[str, Any], site: str, seal_key: x25519.X25519PrivateKey,
                sign_key: ed25519.Ed25519PrivateKey, *, members: PinnedKeys) -> dict[str, Any]:
    """A surviving site's reveal: its shares of b_i (i survived) and of k_ij (i survived, j dropped).

    ``members`` is the site's pinned list of the study's sites (signing and sealing keys): the
    roster is checked again (:func:`check_roster`), and the reveal is refused unless ``t − 1`` of
    them, other than this site, are among the survivors (:func:`check_survivors`).
    """
    survivors, dropped = parse_request(request, rnd)
    if site not in survivors:
        raise RefusedError(f"site {site!r} is not among round {rnd.id}'s survivors: it reveals nothing")
    check_roster(rnd, members, site, "request")
    check_survivors(rnd, members, site, survivors)
    me = rnd.member(site)
    if key_id(sign_key) != key_id(me.sign_pub):
        raise RefusedError(f"site {site!r}: the signing key is not the one round {rnd.id} lists for it")
    try:
        mine = dict(request["shares"][site])
    except (KeyError, TypeError):
        raise RefusedError(f"request refused: no share envelopes for site {site!r}") from None
    out = {}
    for dealer in survivors:
        blob = unb64(mine.get(dealer))
        if blob is None:
            raise RefusedError(f"request refused: no share envelope from {dealer!r} for {site!r}")
        try:
            body = json.loads(open_sealed(blob, seal_key, name=f"shares from {dealer!r}").decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise RefusedError(f"shares from {dealer!r}: malformed") from None
        if not isinstance(body, dict):
            raise RefusedError(f"shares from {dealer!r}: malformed")
        _check_signature(body, rnd.member(dealer).sign_pub, f"shares from {dealer!r}")
        if (body.get("round"), body.get("dealer"), body.get("holder"),
            body.get("format")) != (rnd.id, dealer, site, SHARES_FORMAT):
            raise RefusedError(f"shares from {dealer!r}: for another round, dealer or holder (replayed)")
        held = body.get("shares") if isinstance(body.get("shares"), dict) else {}
        wanted = [SELF] + [f"k:{j}" for j in dropped]
        if any(w not in held for w in wanted):
            raise RefusedError(f"shares from {dealer!r}: incomplete")
        out[dealer] = {w: held[w] for w in wanted}
    doc = {"format": REVEAL_FORMAT, "version": 1, "round": rnd.id, "site": site, "survivors": survivors,
           "shares": out}
    return _signed(doc, sign_key)


def finish(rnd: SecureRound, uploads: Sequence[Upload], request: Mapping[str, Any],
           reveals: Sequence[Mapping[str, Any]]) -> tuple[list[MarginalTable], dict[str, Any]]:
    """The survivors' summed tables from their uploads and at least ``t`` reveals.

    Returns
    -------
    (tables, info)
        ``info``: round, sites (survivors), dropped, threshold, revealed_by.
    """
    survivors, dropped = parse_request(request, rnd)
    by_site = {u.masked.site: u for u in uploads}
    if sorted(by_site) != survivors:
        raise RefusedError(f"round {rnd.id}: the uploads given ({', '.join(sorted(by_site))}) are not the request's "
                           f"survivors ({', '.join(survivors)})")
    shares: dict[tuple[str, str], dict[int, int]] = {}
    revealed_by = []
    for k, rv in enumerate(reveals):
        site = rv.get("site")
        name = f"reveal #{k + 1}" + (f" of {site!r}" if isinstance(site, str) else "")
        if not isinstance(site, str) or site not in survivors:
            raise RefusedError(f"{name} refused: not from a survivor of round {rnd.id}")
        if site in revealed_by:
            raise RefusedError(f"{name} refused: site {site!r} revealed twice")
        _check_signature(rv, rnd.member(site).sign_pub, name)
        if rv.get("round") != rnd.id or rv.get("survivors") != survivors:
            raise RefusedError(f"{name} refused: for another round or another survivor set")
        x = rnd.member(site).index
        body = rv.get("shares") if isinstance(rv.get("shares"), dict) else {}
        for dealer in survivors:
            held = body.get(dealer) if isinstance(body.get(dealer), dict) else {}
            for w in [SELF] + [f"k:{j}" for j in dropped]:
                if w not in held:
                    raise RefusedError(f"{name} refused: no share of {w} from {dealer!r}")
                shares.setdefault((dealer, w), {})[x] = shamir.share_int(held[w],
                                                                         f"share of {w} from {dealer!r} in {name}")
        revealed_by.append(site)
    if len(revealed_by) < rnd.threshold:
        raise RefusedError(f"round {rnd.id}: {len(revealed_by)} sites revealed their shares, the threshold is "
                           f"{rnd.threshold}")
    self_seeds = {i: shamir.combine(shares[(i, SELF)], rnd.threshold, f"self-mask seed of {i!r}") for i in survivors}
    dangling = {(i, j): shamir.combine(shares[(i, f"k:{j}")], rnd.threshold, f"pairwise seed of {i!r} and {j!r}")
                for i in survivors for j in dropped}
    contributions = [by_site[s].masked for s in survivors]
    check_layouts(contributions)
    total = recover_sum({s: by_site[s].masked.vector for s in survivors}, self_seeds, dangling)
    info = {"round": rnd.id, "sites": survivors, "dropped": dropped, "threshold": rnd.threshold,
            "revealed_by": sorted(revealed_by)}
    return decode_tables(total, contributions), info
