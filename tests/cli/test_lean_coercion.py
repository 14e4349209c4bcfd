"""Option values coerced without pydantic (``cli/app._plain_value``) are the values Typer's own
pydantic adapter gives: on every text the lean rule accepts, the same value of the same type; texts
it declines go to the adapter (so its values and error messages are Typer's)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer import _coercion
from typer.models import OptionInfo

from marg.cli.app import _plain_value

TEXTS = ["0", "1", "-1", "007", "+1", " 3", "3 ", "1_000", "1.5", "-0.5", ".5", "5.", "1e-3", "1E5", "1e99",
         "1e999", "nan", "inf", "-0", "abc", "", "12345678901234567890", "0x10", "1.5e", "--1", "٣", "１",
         "1e+05", "00.5", "-.5", "0.0000000000000000000000001", "123456789012345678.75", "9007199254740993",
         "a/b.csv", "-", "~/x", " x "]


def adapter_value(annotation, value):
    """What Typer 0.29's adapter returns for ``value`` (or the exception it raises)."""
    rp = _coercion.build_runtime_param(_coercion.resolve_type_descriptor(annotation, OptionInfo()))
    try:
        return rp.adapter.validate_python(value)
    except Exception as exc:  # noqa: BLE001  (any refusal: the lean rule must have declined it)
        return exc


def same(annotation, value) -> None:
    ok, lean = _plain_value(annotation, value)
    if not ok:
        return
    ref = adapter_value(annotation, value)
    assert not isinstance(ref, Exception), f"the lean rule took {value!r} as {annotation}, the adapter refused it"
    assert type(ref) is type(lean) and ref == lean, (annotation, value, lean, ref)
    if isinstance(ref, float):
        assert repr(ref) == repr(lean)  # -0.0 and 0.0 too


@pytest.mark.parametrize("annotation", [str, int, float, bool, Path])
def test_the_lean_values_are_the_adapters_on_a_battery(annotation):
    taken = 0
    for text in [*TEXTS, 5, 2.5, True, Path("a")]:
        same(annotation, text)
        taken += _plain_value(annotation, text)[0]
    assert taken >= 1  # the rule does take the canonical values


def test_lists_take_each_item_or_decline_the_whole():
    assert _plain_value(list[Path], ("a", "b")) == (True, [Path("a"), Path("b")])
    assert _plain_value(list[int], ("1", "x"))[0] is False
    assert _plain_value(list[str], ["x", " y"]) == (True, ["x", " y"])


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="0123456789-+.eE_ x", max_size=12))
def test_number_texts_agree_with_the_adapter(text):
    same(int, text)
    same(float, text)
