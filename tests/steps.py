"""Work counted, not timed: the lines of Python a call runs.

A test that wants to know how some work grows (linear in the tools, in a marker's
length) counts the lines the interpreter runs for it (``sys.settrace``'s line events,
one per line run, one more per turn of a loop) at two sizes and compares the counts.
The count is the same on a loaded machine as on an idle one, where a clock is not; it
sees the work done in Python (a list comprehension run once per item is a loop of its
own), not inside one call into C, which ``make bench-linear`` times.
"""

from __future__ import annotations

import sys
from typing import Any, Callable


def lines_run(function: Callable[..., Any], *args: Any, **kwargs: Any) -> int:
    """How many lines of Python ``function(*args, **kwargs)`` runs, on this thread."""
    if sys.gettrace() is not None:
        raise RuntimeError("another tracer (a debugger, coverage) is running")
    count = 0

    def line(frame, event, arg):
        nonlocal count
        if event == "line":
            count += 1
        return line

    def call(frame, event, arg):
        return line

    sys.settrace(call)
    try:
        function(*args, **kwargs)
    finally:
        sys.settrace(None)
    return count
