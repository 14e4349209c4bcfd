"""The one pinning of a study's keys: each site's signing **and** sealing key, as the site itself knows them.

Secure aggregation seals every Shamir share to the recipient's X25519 key named in the round's
roster. The roster is written by the learner, so a site that checks only the roster's *signing*
keys seals its shares to whatever sealing keys the learner put beside them: with its own sealing
keys under the other sites' real signing keys, the learner opens every share and unmasks a site
alone. A pinned key set (:class:`PinnedKeys`) is what a site trusts independently of the learner:
the study file (signed once, read by every command of a study) or the site's own members folder
(``SITE.sign.pub`` and ``SITE.seal.pub``, ``marg keys trust``). :func:`check_pinned_roster` refuses
a roster in which a pinned site appears under any other signing or sealing key, before anything is
sealed to it, and counts the members whose both keys are pinned.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping

from cryptography.hazmat.primitives.asymmetric import ed25519, x25519

from marg.errors import InputError, RefusedError

from .keys import (SEAL_PUB_SUFFIX, SIGN_PUB_SUFFIX, PathLike, key_id, load_seal_public_key, load_verify_key,
                   public_bytes, short_id, validate_site_name)


@dataclass(frozen=True)
class Pinned:
    """One party's pinned keys: its Ed25519 signing key and its X25519 sealing key (None: not pinned)."""

    site: str
    sign_pub: ed25519.Ed25519PublicKey
    seal_pub: x25519.X25519PublicKey | None

    @property
    def sign_id(self) -> str:
        return key_id(self.sign_pub)

    def seals_to(self, seal_pub: x25519.X25519PublicKey) -> bool:
        """Whether ``seal_pub`` is this party's pinned sealing key."""
        return self.seal_pub is not None and public_bytes(self.seal_pub) == public_bytes(seal_pub)


class PinnedKeys:
    """A set of pinned parties, by name.

    Parameters
    ----------
    parties : the pinned parties (names unique)
    source : where they come from, for messages (a study file, a members folder)
    """

    def __init__(self, parties: Iterable[Pinned], source: str) -> None:
        self.source = str(source)
        self.parties: dict[str, Pinned] = {}
        for p in parties:
            validate_site_name(p.site)
            if p.site in self.parties:
                raise InputError(f"{self.source}: site {p.site!r} is pinned twice")
            self.parties[p.site] = p

    @classmethod
    def from_dir(cls, directory: PathLike) -> "PinnedKeys":
        """Every ``SITE.sign.pub`` of a folder, with ``SITE.seal.pub`` beside it where present."""
        d = Path(directory)
        if not d.is_dir():
            raise InputError(f"members {str(d)!r} is not a directory")
        parties = []
        for f in sorted(d.glob(f"*{SIGN_PUB_SUFFIX}")):
            site = f.name[: -len(SIGN_PUB_SUFFIX)]
            seal_file = d / f"{site}{SEAL_PUB_SUFFIX}"
            parties.append(Pinned(site, load_verify_key(f),
                                  load_seal_public_key(seal_file) if seal_file.exists() else None))
        return cls(parties, str(d))

    def get(self, site: str) -> Pinned | None:
        return self.parties.get(site)

    def __contains__(self, site: object) -> bool:
        return site in self.parties

    def __len__(self) -> int:
        return len(self.parties)


def check_member_keys(pinned: PinnedKeys, site: str, sign_pub: ed25519.Ed25519PublicKey,
                      seal_pub: x25519.X25519PublicKey,
                      what: str) -> bool:
    """Whether ``site`` with these keys is a pinned member; refuse a pinned name under another key.

    Returns True when both keys are the pinned ones, False when ``site`` is not pinned (or its
    sealing key is not). Raises :class:`RefusedError` when the name is pinned with a different
    signing key, or with a pinned sealing key that differs (the unmasking roster).
    """
    p = pinned.get(site)
    if p is None:
        return False
    if key_id(sign_pub) != p.sign_id:
        raise RefusedError(f"{what} refused: site {site!r} appears under signing key {short_id(key_id(sign_pub))}, not "
                           f"the key {short_id(p.sign_id)} pinned in {pinned.source}")
    if p.seal_pub is None:
        return False
    if not p.seals_to(seal_pub):
        raise RefusedError(f"{what} refused: site {site!r} appears under a sealing key that is not the one pinned in "
                           f"{pinned.source} (shares sealed to it could be opened by whoever wrote the roster); "
                           "nothing was sealed")
    return True


def pinned_split(members: Mapping[str, tuple[ed25519.Ed25519PublicKey, x25519.X25519PublicKey]], pinned: PinnedKeys,
                 what: str) -> tuple[list[str], list[str]]:
    """``members`` split into those whose both keys are pinned and the others (:func:`check_member_keys`
    refuses a pinned name under another key)."""
    known, unknown = [], []
    for s, (sp, cp) in members.items():
        (known if check_member_keys(pinned, s, sp, cp, what) else unknown).append(s)
    return known, unknown


def check_pinned_survivors(members: Mapping[str, tuple[ed25519.Ed25519PublicKey, x25519.X25519PublicKey]],
                           pinned: PinnedKeys, site: str, threshold: int, what: str) -> list[str]:
    """The survivors other than ``site`` whose both keys are pinned; refuse fewer than ``threshold − 1``.

    ``members``: the surviving sites as ``{site: (signing key, sealing key)}``. The learner chooses who
    "dropped out": declaring pinned sites dropped could leave keys it holds as every survivor but this
    site, whose reveal then gives away its self-mask seed. With ``t − 1`` pinned others among the
    survivors, keys the learner holds hold fewer than ``t`` shares of any seed.
    """
    others = {s: k for s, k in members.items() if s != site}
    known, unknown = pinned_split(others, pinned, what)
    if len(known) < threshold - 1:
        raise RefusedError(f"{what} refused: only {len(known)} of the other survivors have both keys pinned in "
                           f"{pinned.source}, fewer than the threshold minus one ({threshold - 1}); not pinned: "
                           f"{', '.join(unknown) or 'none'} (pinned sites declared dropped would leave this site's "
                           "table to keys the learner may hold)")
    return known


def check_pinned_roster(members: Mapping[str, tuple[ed25519.Ed25519PublicKey, x25519.X25519PublicKey]],
                        pinned: PinnedKeys, site: str, threshold: int, what: str) -> list[str]:
    """The roster's members whose signing and sealing keys are both pinned; refuse below ``threshold``.

    ``members``: the roster as ``{site: (signing key, sealing key)}``. Every pinned name must carry
    its pinned keys (:func:`check_member_keys`); ``site`` itself must be pinned with both keys, so
    that its own entry cannot be swapped either. Fewer than ``threshold`` fully pinned members is
    refused: the remaining shares would be sealed to keys the learner may hold.
    """
    known, _ = pinned_split(members, pinned, what)
    if site not in known:
        raise RefusedError(f"{what} refused: this site ({site!r}) is not pinned with both its signing and sealing key "
                           f"in {pinned.source} (marg keys trust SITE.seal.pub, or the study file)")
    if len(known) < threshold:
        unknown = sorted(set(members) - set(known))
        raise RefusedError(f"{what} refused: only {len(known)} of its {len(members)} sites have both keys pinned in "
                           f"{pinned.source}, below the threshold {threshold}; not pinned: {', '.join(unknown)} "
                           "(a roster padded with keys the learner holds unmasks this site)")
    return known
