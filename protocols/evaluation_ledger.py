"""What a site's ledger knows of its evaluations: held-out sets, the one exact evaluation, ordinals, refusals.

The evaluation round must not be an oracle: a learner that signs a probe model (one that says
"yes" for one combination of values) must not tell, from a refusal, a message or a missing
ledger entry, whether a held-out patient has those values. So, whatever the site's
configuration:

- **one exact evaluation per held-out set.** Every split the site's key draws (any fraction,
  by rows or by an id column) nests in or overlaps the others, so they count as one set
  (:func:`exact_group`): after one exact evaluation — released *or refused* — every later
  exact evaluation is refused before any row is read (an older marg's exact evaluation too);
  further evaluations need DP, which composes on the budget;
- **refusals are recorded like releases**: an evaluation refused after the rows were read
  (the min-cell rule, data changed, no held-out rows) appends a ledger entry (no statistics,
  no cost, ``source.evaluation.refused``), so no answer is missing from the ledger, and its
  message names no cell, class or count;
- **the ordinal**: every evaluation's bundle header carries ``evaluations_on_split``, the rank
  of this model among the distinct models evaluated on that held-out set (1 for the first),
  recorded in the ledger entry against the set (``source.evaluation``), so ``marg certify``
  can account for the models tried on the same patients: the j-th model's certificate takes
  α·6/(π²·j²) (:func:`marg.learners.certification.holdout_certificate.evaluation_share`), shares that add up to α
  however many models follow, so keeping the best of them is covered without a count stated. A
  study's pooled evaluation round carries the largest ordinal among the sites that answered; when it evaluates
  several models in one release, the first model's record lists the others' under ``others``, each counted
  (:func:`ordinals`: consecutive ranks), so the ledger's count grows by the number of models evaluated.
"""

from __future__ import annotations

import hashlib
from typing import Any, Sequence

from marg._util import canonical_json
from marg.errors import RefusedError


def held_set_id(split: Any) -> str:
    """The held-out set a :class:`marg.marginals.holdout.ModelSplit` evaluates (32 hex): its rows'
    keyed fingerprint, count, fraction and split column (the key itself never leaves it)."""
    spec = split.spec
    text = f"{spec.id_column or ''}\x00{float(spec.fraction)!r}\x00{split.n_held}\x00{split.held_fingerprint}"
    return hashlib.sha256(b"marg-held-set\x00" + split.key + text.encode()).hexdigest()[:32]


def exact_group(split: Any) -> str:
    """All held-out sets of this site's split key (32 hex): they nest or overlap, so they share the one exact
    evaluation."""
    return hashlib.sha256(b"marg-exact-group\x00" + split.key).hexdigest()[:32]


def evaluations(entries: Sequence[dict[str, Any]]) -> list[tuple[int, dict[str, Any]]]:
    """``(seq, source.evaluation)`` of every evaluation entry of a ledger, released or refused."""
    out = []
    for e in entries:
        ev = (e.get("source") or {}).get("evaluation") if isinstance(e.get("source"), dict) else None
        if isinstance(ev, dict):
            out.append((int(e.get("seq", 0)), ev))
            # one release of several models' tables (a study's evaluation round): each model its own record
            out += [(int(e.get("seq", 0)), o) for o in ev.get("others") or () if isinstance(o, dict)]
    return out


def check_exact(entries: Sequence[dict[str, Any]], split: Any) -> None:
    """Refuse a second exact evaluation of this site's held-out patients (before any row is read)."""
    group = exact_group(split)
    earlier = [(seq, ev) for seq, ev in evaluations(entries) if ev.get("exact") and ev.get("group") == group]
    # an exact evaluation recorded by an older marg (no record of its held-out set): its digests' scope says it
    earlier += [(int(e.get("seq", 0)), {}) for e in entries if isinstance(e.get("exact"), dict)
                and e["exact"].get("scope") == "evaluation" and not evaluations([e])]
    for seq, _ in earlier[:1]:
        raise RefusedError(f"refused: this site's held-out patients had their one exact evaluation (ledger entry "
                           f"#{seq}); every later evaluation needs differential privacy (--epsilon): a second "
                           "exact one could tell a held-out patient's values by difference")


def check_uncapped(entries: Sequence[dict[str, Any]], split: Any, capped: bool, allow: bool) -> bool:
    """Refuse a second DP evaluation of this site's held-out patients when no cap bounds them (before any row is read).

    With a cap, DP evaluations compose on it. With none, evaluations of probe models (each "yes"
    for one combination of values) repeat without limit and reveal a held-out patient's values;
    the first is released, later ones only with ``allow`` (``--allow-repeated-evaluations``).
    Returns whether this evaluation is such an allowed repeat (the ledger's record says so).
    """
    if capped:
        return False
    group = exact_group(split)
    earlier = [seq for seq, ev in evaluations(entries) if not ev.get("exact") and ev.get("group") == group
               and ev.get("refused") is None]
    if not earlier:
        return False
    if not allow:
        raise RefusedError(f"refused: this site's held-out patients were evaluated under DP already (ledger entry "
                           f"#{earlier[0]}) and the site has no cap: repeated evaluations with no cap are an oracle "
                           "on the held-out patients; set a cap (marg audit init/budget) or "
                           "--allow-repeated-evaluations")
    return True


def ordinal(entries: Sequence[dict[str, Any]], split: Any, model: str) -> int:
    """The rank of ``model`` (its file digest) among the distinct models evaluated on this held-out set (1 for the
    first)."""
    return ordinals(entries, split, [model])[0]


def ordinals(entries: Sequence[dict[str, Any]], split: Any, models: Sequence[str]) -> list[int]:
    """The ranks of ``models`` evaluated together on this held-out set, in order: each :func:`ordinal` as if the ones
    before it were already recorded (a new model after the others, a model evaluated before keeping its rank)."""
    sid, seen = held_set_id(split), []
    for _, ev in evaluations(entries):
        if ev.get("split") == sid and ev.get("model") not in seen:
            seen.append(ev.get("model"))
    out = []
    for m in models:
        if m not in seen:
            seen.append(m)
        out.append(seen.index(m) + 1)
    return out


def record_of(split: Any, model: str, exact: bool, rank: int, refused: str | None = None,
              repeated_uncapped: bool = False) -> dict[str, Any]:
    """The ledger's ``source.evaluation`` of one evaluation (``refused``: why, in a word, or None;
    ``repeated_uncapped``: a repeat allowed with no cap, :func:`check_uncapped`)."""
    rec = {"split": held_set_id(split), "group": exact_group(split), "model": model, "exact": bool(exact),
           "evaluations_on_split": int(rank)}
    if repeated_uncapped:
        rec["repeated_without_cap"] = True
    if refused is not None:
        rec["refused"] = refused
    return rec


def record_refusal(ledger: Any, signing_key: Any, site: str, record: dict[str, Any], time: str | None = None) -> None:
    """Append the entry of a refused evaluation: no statistics, no cost, ``source.evaluation`` = ``record``.

    Its ``bundle`` field is the digest of the refusal's record (no bundle left the site).
    """
    from marg._util import now_iso
    from marg.marginals.accounting import PrivacyCost

    when = time or now_iso()
    digest = hashlib.sha256(canonical_json({"refused_evaluation": record, "site": site, "time": when})).hexdigest()
    ledger.append(bundle_digest=digest, site=site, statistics=[], cost=PrivacyCost.zero(), private_key=signing_key,
                  source={"kind": "evaluation", "evaluation": record}, time=when)
