"""Reading literals in text: matching a marker with tolerance for whitespace, and
deciding how much of a text may still turn into a marker."""

from __future__ import annotations

import re

from .format import STOP


def _skip_space(text, at):
    while at < len(text) and text[at].isspace():
        at += 1
    return at


def _match(text, at, literal):
    """The end of ``literal`` written at ``at`` — exactly, or with other whitespace
    around it — or -1."""
    if text.startswith(literal, at):
        return at + len(literal)
    core = literal.strip()
    at = _skip_space(text, at)
    if not text.startswith(core, at):
        return -1
    at += len(core)
    trail = literal[len(literal.rstrip()) :]
    return at + len(trail) if trail and text.startswith(trail, at) else at


def _seek(text, at, literal):
    """Where the next ``literal`` (less its surrounding whitespace) begins, or -1."""
    core = literal.strip()
    return text.find(core, at) if core else at


def _before(value, literal):
    """A value read up to ``literal``, less the whitespace the literal starts with."""
    lead = literal[: len(literal) - len(literal.lstrip())]
    if lead and value.endswith(lead):
        return value[: len(value) - len(lead)]
    return value


def _good_name(name):
    """Whether ``name`` can be a function name: short, and one word."""
    return len(name) <= 256 and name.split() == [name]


def _word_end(text, at):
    """The end of a name written with nothing after it but the next marker."""
    end = at
    while end < len(text) and (text[end].isalnum() or text[end] in "_-.:"):
        end += 1
    return end if end > at else -1


def _strip_stop(text):
    """Drop one end-of-turn marker (and whitespace) at the end of the text."""
    trimmed = text.rstrip()
    for stop in STOP:
        if trimmed.endswith(stop):
            return trimmed[: len(trimmed) - len(stop)]
    return text


def _trim_end(text, markers):
    """``text`` less the whitespace and end-of-turn markers it ends with."""
    changed = True
    while changed:
        changed = False
        text = text.rstrip()
        for marker in markers:
            if text.endswith(marker):
                text = text[: len(text) - len(marker)]
                changed = True
    return text


def _partial_at(text, marker):
    """Where a proper prefix of ``marker`` that ends ``text`` starts, or len(text)."""
    if not marker:
        return len(text)
    at = text.find(marker[0], max(0, len(text) - len(marker) + 1))
    while at >= 0:
        if marker.startswith(text[at:]):
            return at
        at = text.find(marker[0], at + 1)
    return len(text)


def _tail_pattern(markers):
    """(pattern, reach): the pattern matches a proper prefix of one of ``markers``
    or of an end-of-turn marker that ends the text, searched for in its last
    ``reach`` characters only."""
    found = _TAIL_PATTERNS.get(markers)
    if found is None:
        whole = [marker for marker in markers + tuple(STOP) if marker]
        prefixes = sorted(
            {marker[:size] for marker in whole for size in range(1, len(marker))}
        )
        pattern = (
            "(?:%s)\\Z" % "|".join(map(re.escape, prefixes)) if prefixes else "(?!)"
        )
        found = _TAIL_PATTERNS[markers] = (
            re.compile(pattern),
            max(map(len, whole), default=0),
        )
    return found


_TAIL_PATTERNS: dict = {}


def _settled(text, markers):
    """How much of ``text`` can be sent: all but a tail that may still become one
    of ``markers`` or an end-of-turn marker, and the whitespace before it."""
    pattern, reach = _tail_pattern(markers)
    found = pattern.search(text, max(0, len(text) - reach))
    kept = text[: found.start() if found else len(text)].rstrip()
    for stop in STOP:
        if stop and kept.endswith(stop):
            return len(kept[: len(kept) - len(stop)].rstrip())
    return len(kept)


def _undecided(head, markers):
    """Whether more text could still make ``head`` start with one of ``markers``."""
    return any(
        len(head) < len(marker) and marker.startswith(head) for marker in markers
    )


def _stops(*markers):
    """A pattern finding what stops a chunk from being plain text: a character
    that may start one of ``markers`` or an end-of-turn marker."""
    firsts = "".join(sorted({marker[0] for marker in markers + tuple(STOP) if marker}))
    return re.compile("[%s]" % re.escape(firsts) if firsts else "(?!)")


def _decided(text, literal):
    """Whether more text could still change what ``_match(text, 0, literal)`` says."""
    if text.startswith(literal):
        return True
    if literal.startswith(text):
        return False
    rest = text.lstrip()
    if not rest:
        return False
    core = literal.strip()
    if rest.startswith(core):
        tail = rest[len(core) :]
        trail = literal[len(literal.rstrip()) :]
        return not (trail and len(tail) < len(trail) and trail.startswith(tail))
    return not core.startswith(rest)


def _maybe_stop(text):
    """Whether ``text`` may still turn out to be just an end-of-turn marker, with
    whitespace around it (whitespace after a part of one ends that hope)."""
    head = text.lstrip()
    return any(stop.startswith(head) or head.rstrip() == stop for stop in STOP if stop)
