"""DeLFT's command-line helpers, at the module path scripts built on DeLFT import them from.

>>> t_or_f("f"), parse_number_ranges("9-12,15")
(False, [9, 10, 11, 12, 15])
"""
import argparse
from typing import List


def t_or_f(text: str) -> bool:
    """DeLFT's ``--early-stop true|false``: any case-insensitive prefix of TRUE or FALSE (the empty
    string is True, as in DeLFT).

    Args:
        text: the option's value.

    Returns:
        The boolean it names.

    Raises:
        argparse.ArgumentTypeError: neither.
    """
    value = str(text).strip().upper()
    if "TRUE".startswith(value):
        return True
    if "FALSE".startswith(value):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def parse_number_ranges(text: str) -> List[int]:
    """Indices from ``"9-30"``, ``"9-25,28"`` or ``"[0, 2]"`` (ranges include both ends).

    Args:
        text: numbers and ranges, comma-separated.

    Returns:
        The indices, in the order written.

    Raises:
        argparse.ArgumentTypeError: not numbers or increasing ranges.
    """
    indices = []
    for part in str(text).strip().strip("[]").split(","):
        part = part.strip()
        if not part:
            continue
        first, dash, last = part.partition("-")
        try:
            start, end = int(first), int(last if dash else first)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an index or a range: {part!r}") from None
        if start < 0 or end < start:
            raise argparse.ArgumentTypeError(f"not an increasing range of indices: {part!r}")
        indices.extend(range(start, end + 1))
    return indices
