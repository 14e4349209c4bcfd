"""Key roles: whether a signing key is a site's or the learner's, as its ``.sign.pub`` declares.

A signing key is a *site*'s (it signs bundles and ledger entries) or the *learner*'s (it signs
models, secure-aggregation rounds and sums). :func:`protocols.keys.generate_keys` writes the
role as the first line of ``NAME.sign.pub`` (``marg-role: site`` or ``marg-role: learner``,
before the PEM block); a trust store (:mod:`protocols.trust_store`) reads it, and verification
checks it (:func:`protocols.signing.trusted_signer`): a model signed by a site's key is refused
even when that key is trusted (a roster holds site keys). A ``.sign.pub`` without the line (an
older marg) has no role: it is accepted as a site's, never as the learner's; ``marg keys trust
PUB --trust DIR --role learner`` marks the copy in the verifier's store (:func:`with_role`).
"""

from __future__ import annotations

import re

from marg.errors import InputError

ROLES = ("site", "learner")
ROLE_LINE = re.compile(rb"^marg-role: ([a-z]+)\r?\n")


def role_line(role: str) -> bytes:
    """The first line of a ``.sign.pub`` naming its key's role."""
    if role not in ROLES:
        raise InputError(f"unknown key role {role!r} (expected one of {', '.join(ROLES)})")
    return f"marg-role: {role}\n".encode()


def read_role(data: bytes, name: str = "public key") -> str | None:
    """The role a ``.sign.pub`` file's bytes declare (None: no role line, an older marg)."""
    m = ROLE_LINE.match(data)
    if m is None:
        return None
    role = m.group(1).decode()
    if role not in ROLES:
        raise InputError(f"{name}: unknown key role {role!r} (expected one of {', '.join(ROLES)})")
    return role


def with_role(data: bytes, role: str) -> bytes:
    """``.sign.pub`` bytes with their role line set to ``role``."""
    m = ROLE_LINE.match(data)
    return role_line(role) + (data[m.end():] if m else data)
