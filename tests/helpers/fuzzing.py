"""What the fuzz tests feed the parsers: arbitrary JSON values and one field of a document changed.

Shared by tests/marg/test_fuzz_parsers.py and tests/protocols/test_fuzz_trust.py.
"""

from __future__ import annotations

import json
import random
from typing import Any, Callable

from hypothesis import strategies as st

# Integers stay small: a model whose state names a 10⁶-level block asks numpy for terabytes, which
# is a resource question (a signed model from a trusted learner never does), not a parsing one.
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-100, 100) | st.floats(allow_nan=False, max_value=1e3, min_value=-1e3)
    | st.just(float("nan")) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=8,
)


def paths(d, prefix=()):
    """Every path into the JSON document ``d`` (keys and the first three list indices), ``()`` first."""
    yield prefix
    if isinstance(d, dict):
        for k, v in d.items():
            yield from paths(v, prefix + (k,))
    elif isinstance(d, list):
        for i, v in enumerate(d[:3]):
            yield from paths(v, prefix + (i,))


DELETE = object()
"""The value that deletes the field instead of setting it."""


def mutate(d, path, value):
    """A copy of ``d`` with the field at ``path`` set to ``value`` (deleted for ``DELETE``)."""
    d = json.loads(json.dumps(d))
    cur = d
    for k in path[:-1]:
        cur = cur[k]
    if value is DELETE:
        del cur[path[-1]]
    else:
        cur[path[-1]] = value
    return d


# ----------------------------------------------------------------- the bulk of the inputs, seeded
_EDGE_INTS = (0, 1, -1, 2, 100, -100, 99, -99)
_EDGE_FLOATS = (0.0, -0.0, 1.0, -1.0, 0.5, 1e3, -1e3, 1e-300, 5e-324, 999.9999999999999, float("nan"))
_CHARS = "abcxyzAZ09 _-.,:;\"'\\/{}[]\n\t\x00\x7féß中😀\u200b\ufeff"


def random_text(rng, max_size: int) -> str:
    """A string of at most ``max_size`` characters (ASCII, controls, accents, CJK, emoji, zero-width)."""
    return "".join(rng.choice(_CHARS) for _ in range(rng.randint(0, max_size)))


def random_leaf(rng):
    """One leaf of :data:`json_values`: None, a bool, an integer in [−100, 100], a float in [−1e3, 1e3] or NaN, a short
    text; edge values (0, ±1, the ends of the ranges, −0.0, subnormals) a third of the time."""
    kind = rng.randrange(5)
    edge = rng.random() < 0.34
    if kind == 0:
        return None
    if kind == 1:
        return rng.random() < 0.5
    if kind == 2:
        return rng.choice(_EDGE_INTS) if edge else rng.randint(-100, 100)
    if kind == 3:
        return rng.choice(_EDGE_FLOATS) if edge else rng.uniform(-1e3, 1e3)
    return random_text(rng, 8)


def random_json(rng, leaves: list[int] | None = None):
    """A JSON value of the family :data:`json_values` draws (the same leaves; lists of at most 4, dicts of at
    most 4 with keys of at most 6 characters; at most 8 leaves in all) from ``rng`` (a ``random.Random``):
    about 50 times cheaper per input than hypothesis' draw (4.5 ms of CPU), so the bulk of each fuzz
    test's inputs come from here and a tenth from hypothesis (its edge cases and shrinking)."""
    budget = [rng.randint(1, 8)] if leaves is None else leaves
    if budget[0] > 1 and rng.random() < 0.4:
        items = []
        for _ in range(rng.randint(0, 4)):
            if budget[0] <= 0:
                break
            items.append(random_json(rng, budget))
        return items if rng.random() < 0.5 else {random_text(rng, 6): v for v in items}
    budget[0] -= 1
    return random_leaf(rng)


def seeded(seed: int, check: Callable[[Any], None], make: Callable[[random.Random], Any], n: int) -> None:
    """``n`` inputs ``make(rng)`` from ``random.Random(seed)``, each through ``check``; a failure names its input."""
    rng = random.Random(seed)
    for i in range(n):
        value = make(rng)
        try:
            check(value)
        except Exception as exc:  # noqa: BLE001 - re-raised with the input that made it
            raise AssertionError(f"seeded input {i} (seed {seed}): {value!r}") from exc
