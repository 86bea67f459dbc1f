"""Sizes as warpvm's programs and warpvm.Runtime take them: 4096, "16GiB", "1.5MiB"."""

from __future__ import annotations

import re
from fractions import Fraction

# The binaries' grammar (bench/common/cli.hpp: parse_bytes): a number, then an optional unit.
_SIZE = re.compile(r"^(?P<number>\d+(\.\d+)?)(?P<unit>GiB|MiB|KiB|G|M|K|B)?$")
_SCALE = {"GiB": 2**30, "G": 2**30, "MiB": 2**20, "M": 2**20, "KiB": 2**10, "K": 2**10, "B": 1, None: 1}
_MAX_BYTES = 2**64 - 1


def parse_size(value: int | str) -> int:
    """Bytes from an int or a string such as "16GiB", "512MiB", "1.5KiB" or "4096".

    Raises ValueError for anything else (a negative number, an unknown unit, spaces), or for more
    than 2^64 - 1 bytes. Fractions of a byte are dropped, as the binaries drop them.
    """
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(f"bad size {value!r}: give an int or a string such as '8GiB'")
    if isinstance(value, int):
        number = value
    else:
        match = _SIZE.match(value)
        if match is None:
            raise ValueError(
                f"bad size {value!r}: use a number with an optional unit GiB, MiB, KiB or B (e.g. 4GiB)"
            )
        number = int(Fraction(match["number"]) * _SCALE[match["unit"]])
    if not 0 <= number <= _MAX_BYTES:
        raise ValueError(f"bad size {value!r}: must be in [0, 2^64 - 1] bytes")
    return number
