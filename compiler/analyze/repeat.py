"""Finding the repeated unit: a render with one item against a render with two.

Both the calls of a turn and the arguments of a call are lists that a template writes
item after item. Rendered once with one item and once with two (the second item
differing only in values of the same length), the two renders are

    one = head + unit + tail
    two = head + unit + separator + unit' + tail

and the difference tells us all four parts. Which rotation of ``separator + unit`` is
the unit is ambiguous in principle; we take the one that starts on a token boundary
and makes the unit as long as possible (so the separator is what is left between two
units), which is how a reader would draw the lines.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_DIGITS = re.compile(r"\d")
# Where a unit may begin or end: not inside a marker or a word. (Brackets holding
# JSON are not markers here, unlike in diff.py: a call list is cut between its items.)
_PIECE = re.compile(r"<[^<>\n]{1,64}>|\[[^\[\]\n{}\"]{1,64}\]|\w+|\s+|.", re.DOTALL)


def _boundaries(text: str) -> set[int]:
    found = {0}
    for match in _PIECE.finditer(text):
        found.add(match.end())
    return found


@dataclass(frozen=True)
class Repeat:
    head: str
    unit: str  # the item as it appears in ``one``
    separator: str
    tail: str
    second: str  # the second item as it appears in ``two``


def repeated(one: str, two: str, *, same=lambda text: text) -> Repeat | None:
    """Split ``one``/``two`` as above; ``same`` maps the second item's values onto the
    first's (a call index that counts 0, 1 is made equal by ignoring digits)."""

    def norm(text: str) -> str:
        return _DIGITS.sub("0", same(text))

    extra = len(two) - len(one)
    if extra <= 0:
        return None
    one_n, two_n = norm(one), norm(two)
    start = 0
    while start < len(one) and one_n[start] == two_n[start]:
        start += 1
    bounds = _boundaries(one)
    best, best_score = None, None
    for at in range(start, -1, -1):
        if two_n[at + extra :] != one_n[at:]:
            continue
        period = two[at : at + extra]
        period_n = two_n[at : at + extra]
        for cut in range(len(period)):
            unit = period_n[cut:]
            if not one_n[:at].endswith(unit):
                continue
            head_end = at - len(unit)
            score = (
                (head_end in bounds) + (at in bounds) + (not unit[0].isspace()),
                len(unit),
                at,
            )
            if best_score is None or score > best_score:
                best_score = score
                best = Repeat(
                    head=one[:head_end],
                    unit=one[head_end:at],
                    separator=period[:cut],
                    tail=one[at:],
                    second=period[cut:],
                )
            break
    return best
