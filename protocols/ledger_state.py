"""The ledger's state after n entries, the rules that extend it, and its signed checkpoint.

A ledger is a fold: ``state_n = apply(state_{n-1}, entry_n)``. :class:`LedgerState` holds
everything a new entry is checked against — the chain head, the cumulative privacy spend,
the cap in force and, per site, what exact releases have
disclosed — and :func:`apply_entry` is the single place the rules live:

* ``seq`` is n + 1 and ``prev`` is the hash of line n (the chain);
* a ``cap`` entry costs nothing and may set a cap or lower it, never raise it;
* a ``release`` entry's ``cumulative`` is the previous one plus its ``cost`` (field sums, the
  recorded form), its ``cap`` is the cap in force, and the **composed** spend
  (:class:`marginals.accounting.Spend`: ρ's add, converted once by OpenDP, from each
  entry's recorded cost) stays within it;
* an exact release passes :func:`protocols.exact_releases.check_exact_release`.

Full verification (``marg audit verify``) folds every line; an append folds one line onto
the **checkpoint** — the state after the last entry, signed by the site key and written
beside the ledger (``checkpoint.json``). Its size grows with what was released (distinct
margins), never with the number of entries, so appends cost O(1), as a
transparency log's signed tree head makes its appends cheap.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any, Mapping

from cryptography.hazmat.primitives.asymmetric import ed25519

from marg._util import canonical_json
from marg.errors import InputError, MargError, RefusedError
from marg.marginals.accounting import PrivacyCost, Spend, check_budget

from .exact_releases import check_exact_release, scope
from .ledger_format import GENESIS, HEX64, kind_of, line_hash
from .signing import document_signed_by, sign_document

CHECKPOINT_FILE = "checkpoint.json"
CHECKPOINT_FORMAT = "marg-ledger-checkpoint"
_TOL = 1e-9


def _close(a: float, b: float) -> bool:
    if a == float("inf") or b == float("inf"):
        return a == b
    return abs(a - b) <= _TOL * max(1.0, abs(a), abs(b))


def same_cost(a: PrivacyCost, b: PrivacyCost) -> bool:
    """Equal up to floating-point rounding of the sums."""
    return _close(a.epsilon, b.epsilon) and _close(a.delta, b.delta) and _close(a.rho, b.rho)


@dataclass(frozen=True)
class LedgerState:
    """The ledger after its first ``n`` entries.

    Attributes
    ----------
    n : int
        Entries.
    size : int
        Bytes of the ledger file through entry n (its ``"\\n"`` included).
    head : str
        ``line_hash`` of entry n (genesis zeros when n = 0).
    cumulative : PrivacyCost
        Field sums of all releases' costs (as the entries record them).
    spend : Spend
        The composed spend of all releases (what the cap is checked against).
    cap : PrivacyCost or None
        The cap in force.
    key_id : str or None
        The key that signed the entries (None for an unsigned ledger).
    exact : dict "site/#scope" -> {key: [digest, seq]}
        What the site's exact releases of a scope (its study rows, its held-out rows) disclosed,
        in canonical form (:mod:`protocols.exact_releases`); "site/fingerprint" for the
        entries of an older marg, per codebook.
    suppressed : dict "site/#scope" -> seq
        The first such exact release with suppressed cells.
    """

    n: int = 0
    size: int = 0
    head: str = GENESIS
    cumulative: PrivacyCost = field(default_factory=PrivacyCost.zero)
    cap: PrivacyCost | None = None
    key_id: str | None = None
    exact: dict[str, dict[str, list]] = field(default_factory=dict)
    suppressed: dict[str, int] = field(default_factory=dict)
    spend: Spend | None = field(default_factory=Spend)

    def to_dict(self) -> dict[str, Any]:
        return {"n": self.n, "size": self.size, "head": self.head, "cumulative": self.cumulative.to_dict(),
                "cap": None if self.cap is None else self.cap.to_dict(), "key_id": self.key_id,
                "exact": self.exact, "suppressed": self.suppressed,
                "spend": None if self.spend is None else self.spend.to_dict()}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "LedgerState":
        try:
            st = cls(n=int(d["n"]), size=int(d["size"]), head=str(d["head"]),
                     cumulative=PrivacyCost.from_dict(d["cumulative"]),
                     cap=None if d["cap"] is None else PrivacyCost.from_dict(d["cap"]),
                     key_id=d["key_id"],
                     exact={str(s): {str(k): [str(v[0]), int(v[1])] for k, v in dict(m).items()}
                            for s, m in dict(d["exact"]).items()},
                     suppressed={str(k): int(v) for k, v in dict(d["suppressed"]).items()},
                     # a checkpoint of an older marg has no composed spend: the ledger is folded again
                     spend=Spend.from_dict(d["spend"]) if d.get("spend") is not None else None)
        except (KeyError, TypeError, ValueError, IndexError, MargError) as exc:
            raise InputError(f"malformed ledger state ({type(exc).__name__})") from None
        if st.n < 0 or st.size < 0 or not HEX64.match(st.head) or (st.key_id is not None
                                                                   and not HEX64.match(str(st.key_id))):
            raise InputError("malformed ledger state (bad count, size, head or key id)")
        return st


def apply_entry(state: LedgerState, entry: Mapping[str, Any], line: bytes) -> LedgerState:
    """The state after appending ``entry`` (whose canonical line is ``line``) to ``state``.

    Raises
    ------
    RefusedError
        One line naming the entry and the rule it breaks; the budget rule raises the
        :func:`marginals.accounting.check_budget` message ("privacy budget exhausted: ...").
    """
    seq = entry["seq"]
    where = f"entry seq {seq}"
    if seq != state.n + 1:
        what = "deleted" if seq > state.n + 1 else "reordered or duplicated"
        raise RefusedError(f"{where} at line {state.n + 1}: expected seq {state.n + 1} (an entry was {what})")
    if entry["prev"] != state.head:
        raise RefusedError(f"{where}: previous-entry hash does not match entry {state.n} (an earlier entry was edited, "
                           "deleted or reordered)")
    cost = PrivacyCost.from_dict(entry["cost"])
    cum = PrivacyCost.from_dict(entry["cumulative"])
    recorded_cap = None if entry["cap"] is None else PrivacyCost.from_dict(entry["cap"])
    new = replace(state, n=seq, size=state.size + len(line) + 1, head=line_hash(line),
                  key_id=entry.get("key_id") or state.key_id)
    if kind_of(entry) == "cap":
        if not cost.is_zero or not same_cost(cum, state.cumulative):
            raise RefusedError(f"{where}: a cap entry must cost nothing and keep the spend "
                               f"{state.cumulative.describe()}")
        if recorded_cap is None:
            raise RefusedError(f"{where}: a cap entry without a cap")
        refuse_raised_cap(state.cap, recorded_cap, f"{where}: ")
        return replace(new, cap=recorded_cap)
    total = state.cumulative + cost
    if not same_cost(total, cum):
        raise RefusedError(f"{where}: cumulative spend {cum.describe()} does not equal the sum of costs "
                           f"{total.describe()}")
    if entry.get("v", 1) >= 2:
        if (recorded_cap is None) != (state.cap is None) or (recorded_cap is not None
                                                             and not same_cost(recorded_cap, state.cap)):
            have = "none" if state.cap is None else state.cap.describe_cap()
            raise RefusedError(f"{where}: records cap "
                               f"{'none' if recorded_cap is None else recorded_cap.describe_cap()}, but the cap in "
                               f"force is {have}")
        cap = state.cap
    else:  # version 1: the cap came from budget.json at the time, recorded in the entry
        cap = recorded_cap
    spend = state.spend
    if spend is None:  # an older checkpoint's state: Ledger folds such a ledger from its first line
        raise RefusedError(f"{where}: the ledger state has no composed privacy spend (an older checkpoint)")
    if cap is not None:
        check_budget(cap, spend, cost)
    new = replace(new, cumulative=total, spend=spend.add(cost), cap=cap if entry.get("v", 1) >= 2 else state.cap)
    return apply_exact(new, entry)


def refuse_raised_cap(old: PrivacyCost | None, new: PrivacyCost, where: str = "") -> None:
    """RefusedError (one line) if ``new`` would raise the cap ``old`` in force (None: no cap yet)."""
    if old is not None and not _not_raised(old, new):
        raise RefusedError(f"{where}raises the privacy cap from {old.describe_cap()} to {new.describe_cap()} "
                           "(a cap can be lowered, never raised)")


def _not_raised(old: PrivacyCost, new: PrivacyCost) -> bool:
    """Whether ``new`` allows no release that ``old`` refuses (a currency ``old`` caps stays
    capped, no higher; capping a new currency only adds a limit)."""
    def le(a: float, b: float) -> bool:
        return a <= b * (1 + _TOL)

    if old.rho > 0 and not (0 < new.rho and le(new.rho, old.rho)):
        return False
    if old.epsilon > 0 and not (0 < new.epsilon and le(new.epsilon, old.epsilon) and le(new.delta, old.delta)):
        return False
    return True


def apply_exact(new: LedgerState, entry: Mapping[str, Any]) -> LedgerState:
    digests = entry.get("exact")
    if not digests:
        return new
    rows, digests = scope(digests)
    where = f"{entry['site']}/{rows}"  # a site's exact releases of one scope (or, for older entries, one codebook)
    earlier = {k: (v[0], v[1]) for k, v in new.exact.get(where, {}).items()}
    suppressed = entry.get("suppressed", 0) > 0
    check_exact_release(earlier, new.suppressed.get(where), digests, suppressed)
    merged = {**{k: [d, s] for k, (d, s) in earlier.items()},
              **{k: [d, entry["seq"]] for k, d in digests.items() if k not in earlier}}
    out = replace(new, exact={**new.exact, where: merged})
    if suppressed and where not in new.suppressed:
        out = replace(out, suppressed={**new.suppressed, where: entry["seq"]})
    return out


# ---------------------------------------------------------------------------------------
# checkpoints
# ---------------------------------------------------------------------------------------
def checkpoint_bytes(state: LedgerState, private_key: ed25519.Ed25519PrivateKey | None, time: str) -> bytes:
    """The checkpoint file for ``state``: canonical JSON, signed by the site key (if any)."""
    body = {"format": CHECKPOINT_FORMAT, "version": 1, "time": time, "state": state.to_dict()}
    doc = sign_document(body, private_key) if private_key is not None else {**body, "key_id": None, "signature": None}
    return canonical_json(doc) + b"\n"


def parse_checkpoint(data: bytes, keys: Mapping[str, ed25519.Ed25519PublicKey] | None,
                     name: str) -> tuple[LedgerState, str | None]:
    """Read and verify a checkpoint; return (state, signer key id).

    ``keys`` maps key id to public key: a signed checkpoint must verify under one of them
    (None skips the signature check: only for unpinned, unsigned ledgers).

    Raises
    ------
    RefusedError
        Malformed, altered, or signed by another key.
    """
    try:
        d = json.loads(bytes(data).decode("utf-8"))
        if not isinstance(d, dict) or d.get("format") != CHECKPOINT_FORMAT or d.get("version") != 1:
            raise ValueError
        state = LedgerState.from_dict(d["state"])
        kid, sig = d.get("key_id"), d.get("signature")
        if not isinstance(kid, (str, type(None))) or not isinstance(sig, (str, type(None))):
            raise ValueError
    except (ValueError, UnicodeDecodeError, KeyError, TypeError, RecursionError, InputError):
        raise RefusedError(f"{name}: malformed checkpoint (corrupted or edited)") from None
    if kid is None or sig is None:
        if keys:
            raise RefusedError(f"{name}: unsigned checkpoint, but the ledger is pinned to a key (edited or replaced)")
        return state, None
    if keys is not None:
        pub = keys.get(kid)
        if pub is None:
            raise RefusedError(f"{name}: checkpoint signed by key {str(kid)[:16]!r}, not the site's pinned key "
                               "(re-signed)")
        if not document_signed_by(d, pub):
            raise RefusedError(f"{name}: bad checkpoint signature (edited)")
    return state, kid
