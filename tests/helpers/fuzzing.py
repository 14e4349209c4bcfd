"""What the fuzz tests feed the parsers: arbitrary JSON values and one field of a document changed.

Shared by tests/marg/test_fuzz_parsers.py and tests/protocols/test_fuzz_trust.py.
"""

from __future__ import annotations

import json

from hypothesis import strategies as st

# Integers stay small: a model whose state names a 10⁶-level block asks numpy for terabytes, which
# is a resource question (a signed model from a trusted learner never does), not a parsing one.
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-100, 100) | st.floats(allow_nan=False, max_value=1e3, min_value=-1e3) | st.just(float("nan")) | st.text(max_size=8),
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
