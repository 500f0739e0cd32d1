"""The analysis explained for a reviewer: each decision, why, and the two renders whose
difference led to it, laid out for a terminal.

Renders run to thousands of characters and differ in a few; the common prefix and
suffix are cut to the context next to the difference, and every piece of text is shown
with ``repr`` one line at a time, so whitespace, newlines and look-alike markers can be
told apart.
"""

from __future__ import annotations

import textwrap

from .analyze.evidence import Evidence, Render
from .diff import split

CONTEXT = 80  # characters of common text shown on each side of a difference (whole lines)
WIDTH = 100  # where the reason wraps
MAX_LINES = 16  # lines shown of one differing part before its middle is elided
MAX_LINE = 160  # characters of one line before its middle is elided
INDENT = "   "


def explain(evidence: list[Evidence], *, context: int = CONTEXT) -> str:
    """All decisions, numbered, as one text ending in a newline."""
    blocks = [_decision(number, item, context) for number, item in enumerate(evidence, 1)]
    return "\n".join(blocks)


def _decision(number: int, item: Evidence | str, context: int) -> str:
    if isinstance(item, str):  # evidence not (yet) recorded with its renders
        item = Evidence(item, "")
    lines = [f"{number}. {item.decision}"]
    if item.reason:
        lines += textwrap.wrap(
            f"why: {item.reason}",
            WIDTH,
            initial_indent=INDENT,
            subsequent_indent=INDENT + "     ",
            break_on_hyphens=False,
        )
    renders = [(tag, render) for tag, render in (("A", item.left), ("B", item.right)) if render]
    for tag, render in renders:
        lines.append(f"{INDENT}{tag} = {render.label} ({len(render.text)} characters)")
    if item.left and item.right:  # both renders shown
        lines += _diff(item.left, item.right, context)
    elif len(renders) == 1:
        tag, render = renders[0]
        lines += _piece(f"{tag} ends", _tail(render.text, context))
    else:
        lines.append(f"{INDENT}(follows from the decisions above; no render of its own)")
    return "\n".join(lines) + "\n"


def _diff(left: Render, right: Render, context: int) -> list[str]:
    parts = split(left.text, right.text)
    if not parts.left and not parts.right:
        return [f"{INDENT}A and B are the same text"]
    return [
        *_piece("both", _tail(parts.prefix, context)),
        *_piece("A only", _elided_lines(parts.left)),
        *_piece("B only", _elided_lines(parts.right)),
        *_piece("both", _head(parts.suffix, context)),
    ]


def _piece(tag: str, lines: list[str]) -> list[str]:
    """``lines`` under a tag in a column of its own, so the texts line up."""
    if not lines:
        lines = ["(nothing)"]
    column = f"{INDENT}{tag:<7}"
    return [column + lines[0]] + [" " * len(column) + line for line in lines[1:]]


def _tail(text: str, context: int) -> list[str]:
    """The end of a common prefix: the whole lines right before the difference, as many
    as fit in ``context`` characters (at least the last, itself cut to fit)."""
    lines = text.splitlines(keepends=True)
    kept: list[str] = []
    while lines and (not kept or len(lines[-1]) + sum(map(len, kept)) <= context):
        kept.insert(0, lines.pop())
    if len(kept[0] if kept else "") > context:
        lines.append(kept[0][:-context])
        kept[0] = kept[0][-context:]
    shown = [repr(line) for line in kept]
    return ([_elided("".join(lines))] if lines else []) + shown


def _head(text: str, context: int) -> list[str]:
    """The start of a common suffix: the whole lines right after the difference."""
    lines = text.splitlines(keepends=True)
    kept: list[str] = []
    while lines and (not kept or len(lines[0]) + sum(map(len, kept)) <= context):
        kept.append(lines.pop(0))
    if len(kept[-1] if kept else "") > context:
        lines.insert(0, kept[-1][context:])
        kept[-1] = kept[-1][:context]
    shown = [repr(line) for line in kept]
    return shown + ([_elided("".join(lines))] if lines else [])


def _elided(text: str) -> str:
    count = text.count("\n")
    return f"… {len(text)} characters ({count} line breaks) not shown …"


def _elided_lines(text: str) -> list[str]:
    """A differing part in full, unless it is long: then its start and end."""
    lines = [_short(line) for line in text.splitlines(keepends=True)]
    if len(lines) <= MAX_LINES:
        return lines
    head, tail = MAX_LINES * 3 // 4, MAX_LINES // 4
    return lines[:head] + [f"… {len(lines) - head - tail} lines …"] + lines[-tail:]


def _short(line: str) -> str:
    if len(line) <= MAX_LINE:
        return repr(line)
    head, tail = MAX_LINE * 3 // 4, MAX_LINE // 4
    return f"{line[:head]!r} … {len(line) - head - tail} characters … {line[-tail:]!r}"
