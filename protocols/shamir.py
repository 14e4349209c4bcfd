"""Shamir secret sharing of 32-byte secrets over the prime field GF(2^521 − 1).

A secret ``s`` (32 bytes, read as an integer below 2^256) is the constant term of a random
polynomial ``f`` of degree ``t − 1`` over GF(p), p = 2^521 − 1 (a Mersenne prime); holder ``x``
(1, 2, …, n) gets ``f(x)``. Any ``t`` shares give ``s = f(0)`` by Lagrange interpolation;
fewer than ``t`` are uniformly distributed and say nothing about ``s`` (Shamir 1979).

Used by secure aggregation (:mod:`protocols.secagg`) to share each site's mask seeds among
the sites of a round, so the sum is recovered when sites drop out.
"""

from __future__ import annotations

import secrets
from typing import Mapping, Sequence

from marg.errors import InputError, RefusedError

P = 2**521 - 1
SECRET_BYTES = 32
SHARE_HEX = 131  # 521 bits in hex


def split(secret: bytes, n: int, t: int) -> list[int]:
    """Shares ``f(1), …, f(n)`` of ``secret`` with threshold ``t`` (``1 ≤ t ≤ n``)."""
    if not isinstance(secret, (bytes, bytearray)) or len(secret) != SECRET_BYTES:
        raise InputError(f"a shared secret is {SECRET_BYTES} bytes, got "
                         f"{len(secret) if isinstance(secret, (bytes, bytearray)) else type(secret).__name__}")
    if not 1 <= t <= n:
        raise InputError(f"threshold must be between 1 and the number of holders ({n}), got {t}")
    coeffs = [int.from_bytes(secret, "big")] + [secrets.randbelow(P) for _ in range(t - 1)]
    out = []
    for x in range(1, n + 1):
        y = 0
        for c in reversed(coeffs):  # Horner
            y = (y * x + c) % P
        out.append(y)
    return out


def _interpolate_at_zero(points: Sequence[tuple[int, int]]) -> int:
    total = 0
    for i, (xi, yi) in enumerate(points):
        num, den = 1, 1
        for j, (xj, _) in enumerate(points):
            if j != i:
                num = num * (-xj) % P
                den = den * (xi - xj) % P
        total = (total + yi * num * pow(den, P - 2, P)) % P
    return total


def combine(shares: Mapping[int, int], t: int, what: str = "secret") -> bytes:
    """The secret from at least ``t`` shares ``{x: f(x)}``.

    With more than ``t`` shares, two different subsets of ``t`` are interpolated and must
    agree: a holder that revealed a wrong share is caught (not identified).

    Raises
    ------
    RefusedError
        Fewer than ``t`` shares, shares that do not lie on one polynomial, or a value that is
        not a 32-byte secret.
    """
    pts = sorted((int(x), int(y) % P) for x, y in shares.items())
    if len(pts) < t:
        raise RefusedError(f"{what}: {len(pts)} shares, the threshold is {t}")
    if len({x for x, _ in pts}) != len(pts) or any(x <= 0 for x, _ in pts):
        raise RefusedError(f"{what}: malformed share positions")
    s = _interpolate_at_zero(pts[:t])
    if len(pts) > t and _interpolate_at_zero(pts[-t:]) != s:
        raise RefusedError(f"{what}: the revealed shares do not agree (a site revealed a wrong share)")
    if s >= 2 ** (8 * SECRET_BYTES):
        raise RefusedError(f"{what}: the shares do not encode a {SECRET_BYTES}-byte secret (wrong shares)")
    return s.to_bytes(SECRET_BYTES, "big")


def share_hex(y: int) -> str:
    return format(int(y), f"0{SHARE_HEX}x")


def share_int(text: str, what: str = "share") -> int:
    if not isinstance(text, str) or len(text) != SHARE_HEX:
        raise RefusedError(f"malformed {what}")
    try:
        v = int(text, 16)
    except ValueError:
        raise RefusedError(f"malformed {what}") from None
    if v >= P:
        raise RefusedError(f"malformed {what}")
    return v
