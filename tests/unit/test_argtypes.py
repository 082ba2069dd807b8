"""The command lines' shared argument types: one wording for one mistake, in lunlat and its lab."""

from __future__ import annotations

import argparse

import pytest

from lunlat.argtypes import positive_float


@pytest.mark.parametrize(("text", "said"), [
    ("x", "'x' is not a number"),
    ("0", "'0' must be a finite number greater than 0"),
    ("-2", "'-2' must be a finite number greater than 0"),
    ("nan", "'nan' must be a finite number greater than 0"),
    ("inf", "'inf' must be a finite number greater than 0"),  # a time that never ends
])  # fmt: skip
def test_a_time_in_seconds_is_finite_and_positive(text: str, said: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=f"^{said}$"):
        positive_float(text)


def test_a_fraction_of_a_second_is_taken() -> None:
    assert positive_float("0.2") == 0.2
