"""The one pinning: a roster that swaps any pinned key (signing or sealing) is refused before anything is sealed."""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives.asymmetric import ed25519, x25519

from marg.errors import InputError, RefusedError
from marg.protocols.keys import generate_keys
from marg.protocols.pinning import Pinned, PinnedKeys, check_member_keys, check_pinned_roster


def _party(name: str) -> tuple[str, ed25519.Ed25519PublicKey, x25519.X25519PublicKey]:
    return name, ed25519.Ed25519PrivateKey.generate().public_key(), x25519.X25519PrivateKey.generate().public_key()


def _pinned(parties) -> PinnedKeys:
    return PinnedKeys([Pinned(n, s, c) for n, s, c in parties], "study.json")


def test_the_honest_roster_is_counted_whole():
    parties = [_party(n) for n in ("north", "south", "east")]
    roster = {n: (s, c) for n, s, c in parties}
    assert check_pinned_roster(roster, _pinned(parties), "north", 2, "round") == ["north", "south", "east"]


def test_the_learners_sealing_keys_under_real_signing_keys_are_refused():
    """Issue 45's attack: the other sites' real signing keys beside sealing keys the learner holds."""
    parties = [_party(n) for n in ("north", "south", "east")]
    learner_seal = x25519.X25519PrivateKey.generate().public_key()
    roster = {n: (s, c if n == "north" else learner_seal) for n, s, c in parties}
    with pytest.raises(RefusedError, match="sealing key that is not the one pinned"):
        check_pinned_roster(roster, _pinned(parties), "north", 2, "round r")


def test_a_swapped_signing_key_is_refused():
    parties = [_party(n) for n in ("north", "south")]
    other = ed25519.Ed25519PrivateKey.generate().public_key()
    with pytest.raises(RefusedError, match="signing key"):
        check_member_keys(_pinned(parties), "south", other, parties[1][2], "round")


def test_unpinned_sybils_do_not_reach_the_threshold():
    parties = [_party(n) for n in ("north", "south", "east")]
    sybils = [_party(n) for n in ("s1", "s2")]
    roster = {n: (s, c) for n, s, c in [parties[0], *sybils]}
    with pytest.raises(RefusedError, match="below the threshold 2"):
        check_pinned_roster(roster, _pinned(parties), "north", 2, "round")


def test_the_site_itself_must_be_pinned_with_both_keys(tmp_path):
    for n in ("north", "south"):
        generate_keys(n, tmp_path)
    (tmp_path / "north.seal.pub").unlink()  # a members folder of signing keys only
    pinned = PinnedKeys.from_dir(tmp_path)
    assert pinned.get("north").seal_pub is None and pinned.get("south").seal_pub is not None
    with pytest.raises(RefusedError, match="not pinned with both"):
        check_pinned_roster({"south": (pinned.get("south").sign_pub, pinned.get("south").seal_pub)}, pinned, "north", 1,
                            "round")


def test_a_name_pinned_twice_is_an_input_error():
    p = _party("north")
    with pytest.raises(InputError, match="pinned twice"):
        _pinned([p, p])
