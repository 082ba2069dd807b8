"""Argument types shared by the command lines of lunlat and of its lab (lunlat-lab): one wording for
the same mistake in either."""

from __future__ import annotations

import argparse
import math


def positive_float(text: str) -> float:
    """A finite number greater than 0. Every use is a time in seconds (an interval, a window, a
    duration), where an infinite one would never end: `float` takes "inf", so it is refused here."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0 or math.isinf(value):
        raise argparse.ArgumentTypeError(f"{text!r} must be a finite number greater than 0")
    return value


def positive_int(text: str) -> int:
    if not text.isdigit() or int(text) == 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be a whole number > 0")
    return int(text)


def non_negative_int(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} must be a whole number >= 0")
    return int(text)
