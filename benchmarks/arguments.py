"""Argument types the benchmarks share: a careless value is refused by argparse, naming the option, before any
cluster starts, rather than failing minutes later with a traceback or hanging (a consumer waiting for records
that a run of 0 never produces)."""

from __future__ import annotations

import argparse
from collections.abc import Callable


def at_least(minimum: int) -> Callable[[str], int]:
    """An argparse `type`: a whole number no smaller than `minimum`."""

    def whole_number(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum:,}, got {value:,}")
        return value

    return whole_number


def seconds(text: str) -> float:
    """An argparse `type`: a positive, finite number of seconds."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text}")
    return value


def partition_counts(text: str) -> list[int]:
    """An argparse `type`: a comma-separated list of partition counts, each at least 1, each once."""
    count = at_least(1)
    try:
        return list(dict.fromkeys(count(item.strip()) for item in text.split(",")))
    except argparse.ArgumentTypeError as exc:
        raise argparse.ArgumentTypeError(f"a comma-separated list of partition counts: {exc}") from None
