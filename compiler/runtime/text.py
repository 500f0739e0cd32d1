"""Reading literals in text: matching a marker with tolerance for whitespace, and
deciding how much of a text may still turn into a marker."""

from __future__ import annotations

import re

from .format import (
    CALL_PARTS,
    CALL_SEPARATOR,
    CALL_START,
    CALL_STARTS,
    CONTENT_END,
    CONTENT_HEADERS,
    CONTENT_START,
    CONTENT_STARTS,
    HEADER_END,
    JSON_CALLS,
    MESSAGE_END,
    MESSAGE_OPENER,
    OPENED_BY_PROMPT,
    OPENED_WITH_TOOLS,
    PRESERVED_TOKENS,
    PROMPT_ENDS,
    REASONING_STARTS,
    SECTION_END,
    SECTION_START,
    SECTION_STARTS,
    STOP,
    TOOLS_CHANGE_OPENING,
    TRIGGER,
    TRIGGER_ALSO,
    TURN_BREAK,
    TURN_END_ALSO,
)

# What ends a turn as the readers drop it at the end of the output: STOP, and the
# markers a call's opener begins with (no stop strings: TURN_END_ALSO).
_TURN_ENDS = list(STOP) + [marker for marker in TURN_END_ALSO if marker not in STOP]


def _skip_space(text, at):
    """Where the whitespace from ``at`` ends (a long run in one C-level match)."""
    if at < len(text) and text[at].isspace():
        return _SPACE_RUN(text, at).end()  # type: ignore[union-attr]  # (always matches)
    return at


_SPACE_RUN = re.compile(r"\s*").match  # (\s is exactly str.isspace)


def _match(text, at, literal):
    """The end of ``literal`` written at ``at`` — exactly, or with other whitespace
    around it and between its markers — or -1."""
    if text.startswith(literal, at):
        return at + len(literal)
    # Other whitespace: any run of it, the literal's pieces with any run of it
    # between them, then its trailing whitespace if that is written. One compiled
    # pattern per literal does this in a single C-level match (the fallback is
    # common: whitespace before a call, a marker looked for where something else is
    # written).
    found = (_LOOSE.get(literal) or _loose(literal))(text, at)
    return found.end() if found else -1


def _pieces(literal):
    """(the literal's pieces, its trailing whitespace). The pieces are its core
    cut after each marker in it (a preserved token) and at the whitespace it
    writes: a model may write other whitespace, or some, between a marker and what
    follows it ('[TOOL_CALLS] [' for '[TOOL_CALLS]['), and other whitespace, or
    none, where the literal writes some ('<functionname="' for '<function name="'),
    so what the literal writes there is no piece."""
    found = _PIECES.get(literal)
    if found is not None:
        return found
    if _ARRAY_CLOSER and literal == _ARRAY_CLOSER:
        # The section's calls are one JSON array, which ends at this ']': JSON
        # allows whitespace after it, before the rest of the closer ('[…]\n```'
        # for '[…]```').
        words, trail = _pieces(literal.strip()[1:] + literal[len(literal.rstrip()) :])
        found = _PIECES[literal] = (["]"] + words, trail)
        return found
    core = literal.strip()
    pieces = []
    start = at = 0
    while at < len(core):
        for token in _TOKENS:
            if core.startswith(token, at):
                at += len(token)
                pieces.append(core[start:at].strip())
                start = at
                break
        else:
            at += 1
    pieces.append(core[start:].strip())
    words = [word for piece in pieces for word in piece.split()]
    found = (words, literal[len(literal.rstrip()) :])
    if len(_PIECES) < 256:  # literals are the format's, but a suffix may name a key
        _PIECES[literal] = found
    return found


# The markers a literal is cut after, longest first (a marker may start another).
_TOKENS = sorted((token for token in PRESERVED_TOKENS if token.strip()), key=len)[::-1]
_PIECES: dict = {}
# The section's closer, where the section holds the calls as one JSON array (its
# opener ends with '[', the closer starts with ']' and goes on): cut after the ']'.
_ARRAY_CLOSER = (
    SECTION_END
    if JSON_CALLS
    and SECTION_START.rstrip().endswith("[")
    and SECTION_END.strip().startswith("]")
    and len(SECTION_END.strip()) > 1
    else ""
)


def _head(literal):
    """What ``literal`` is looked for by: its first piece (the rest is matched with
    _match, which allows other whitespace after a marker); "" for no literal."""
    pieces = _pieces(literal)[0]
    return pieces[0] if pieces else ""


# What calls are looked for by.
_SEEK = _head(TRIGGER)
# ... and, where real outputs begin calls otherwise too (overrides), by the first
# pieces of those openers: the trigger's first.
_SEEKS = tuple(dict.fromkeys(map(_head, (TRIGGER,) + TRIGGER_ALSO)))
# Where the content is a unit of the turn (CONTENT_AS_UNIT), the calls after it are
# looked for by the separator's first piece.
_SEPARATOR_SEEK = _head(CALL_SEPARATOR)


def _seek(text, at, limit=None):
    """Where the earliest of ``_SEEKS`` is found in ``text[at:limit]``, or -1."""
    global _KNOWN
    if _KNOWN[0] is text:
        known = _KNOWN[1]
    else:  # a text not looked in before
        known = {}
        _KNOWN = (text, known)
    best = -1
    for seek in _SEEKS:
        if seek in known:
            found = _next_of(text, seek, at, known)
        else:  # (the first look in a text: _next_of's, at once)
            found = text.find(seek, at)
            known[seek] = (at, found)
        if found < 0 or (limit is not None and found + len(seek) > limit):
            continue  # (the first from ``at`` on ends past the limit: all do)
        if best < 0 or found < best:
            best = found
    return best


def _next_of(text, seek, at, known):
    """``text.find(seek, at)``, helped by what ``known`` (``_KNOWN``'s, for
    ``text``) holds: the tries at calls in one text look for each of ``_SEEKS``
    again from where they are, and one that is not written any more (the trigger, where only
    another opener follows) would be looked for to the end of the text at every
    try, which costs the square of the text's length."""
    span = known.get(seek)
    if span is None:
        found = text.find(seek, at)
    elif at < span[0]:
        # only the stretch before what is known is looked in
        found = text.find(seek, at, span[0] + len(seek) - 1)
        if found < 0:
            found = span[1]
    elif span[1] < 0 or span[1] >= at:
        return span[1]
    else:
        found = text.find(seek, at)
    known[seek] = (at, found)
    return found


# (the text, seek → (start, found)): the first place from ``start`` on where the
# seek is written (-1: none) in the last text ``_seek`` looked in (the object itself:
# a str never changes).
_KNOWN: tuple = (None, {})


def _past_start(text, at):
    """Where calls are looked for again once those the trigger at ``at`` starts
    proved none: past the call's opener written there (a later part of it may be
    another opener, and the same broken call is not tried twice) — after the
    section's opener, where real outputs may leave that out (SECTION_STARTS) —
    else after the character at ``at``."""
    if SECTION_STARTS:
        end = _match(text, at, SECTION_START)
        at = end if end >= 0 else at
    return max(at + 1, _match_start(text, at))


def _match_start(text, at):
    """The end of the call's opener written at ``at`` (the template's, else the
    first of the others real outputs write that is), or -1."""
    for start in CALL_STARTS or (CALL_START,):
        end = _match(text, at, start)
        if end >= 0:
            return end
    return -1


def _loose(literal):
    """The ``match`` of the pattern ``_match`` falls back on for ``literal`` (``\\s``
    is exactly ``str.isspace``). Where the literal has a core, it matches exactly
    where ``_match`` finds the literal, written exactly or not."""
    loose = _LOOSE.get(literal)
    if loose is not None:
        return loose
    pieces, trail = _pieces(literal)
    pattern = "".join(r"\s*" + re.escape(piece) for piece in pieces) or r"\s*"
    if trail:
        pattern += "(?:%s)?" % re.escape(trail)
    loose = re.compile(pattern).match
    if len(_LOOSE) < 256:  # literals are the format's, but a suffix may name a key
        _LOOSE[literal] = loose
    return loose


_LOOSE: dict = {}


def _read_to(text, at, literal, limit=None):
    """A value written from ``at`` up to the next ``literal`` (whose core ends by
    ``limit``): (where the value ends, less the whitespace the literal starts with;
    where the literal ends), or None when no literal follows. The value is not
    sliced: it may be long."""
    lead, core, trail = _SPLIT.get(literal) or _split(literal)
    if not core:
        return at, _match(text, at, literal)
    if len(core) == 1:
        end = text.find(core, at, limit)
    else:
        # text.find(core, at), most often in one memchr for the core's first
        # character (see _find)
        end = text.find(core[0], at, limit)
        if end >= 0 and not text.startswith(core, end, limit):
            end = _find(text, core, end + 1, limit)
    if end < 0:
        return None
    # What _match(text, end, literal) reads where the core is written: the
    # whitespace before the core is the value's, the literal's own trailing
    # whitespace is the literal's where it is written.
    stop = end - len(lead) if lead and text.endswith(lead, at, end) else end
    end += len(core)
    if trail and text.startswith(trail, end):
        end += len(trail)
    return stop, end


def _find(text, core, at, limit=None):
    """``text.find(core, at, limit)``, for a ``core`` that is not empty. str.find looks for
    a string of several characters a few characters a step (some 6 µs through 16 KB
    of code looking for '</parameter>'), for one character with C's memchr, twenty
    to thirty times faster: so the next occurrence of the first character is
    tried, a few times, before the search is left to str.find (where that
    character is common, at the cost of those few tries)."""
    first = core[0]
    for _ in range(4):
        at = text.find(first, at, limit)
        if at < 0 or text.startswith(core, at, limit):
            return at
        at += 1
    return text.find(core, at, limit)


def _split(literal):
    """(leading whitespace, core, trailing whitespace) of ``literal``, kept for the
    next time (the literals are the format's, but a suffix may name a key)."""
    core = literal.strip()
    start = len(literal) - len(literal.lstrip()) if core else 0
    found = (literal[:start], core, literal[start + len(core) :])
    if len(_SPLIT) < 256:
        _SPLIT[literal] = found
    return found


_SPLIT: dict = {}


def _before(value, literal):
    """A value read up to ``literal``, less the whitespace the literal starts with."""
    lead = literal[: len(literal) - len(literal.lstrip())]
    if lead and value.endswith(lead):
        return value[: len(value) - len(lead)]
    return value


def _good_name(name):
    """Whether ``name`` can be a function name: short, and one word."""
    return len(name) <= _LONGEST_NAME and name.split() == [name]


# A name (a function's, an argument's, an id) is one word of at most this many
# characters, with any whitespace around it.
_LONGEST_NAME = 256


def _word_end(text, at):
    """The end of a name written with nothing after it but the next marker (read
    no further than a name _good_name takes can reach)."""
    end = at
    stop = min(len(text), at + _LONGEST_NAME + 1)
    while end < stop and (text[end].isalnum() or text[end] in "_-.:"):
        end += 1
    return end if end > at else -1


def _read_name_to(text, at, literal):
    """``_read_to(text, at, literal)`` for a name: the literal is looked for only as
    far as a name _good_name takes can reach (one word of at most 256 characters,
    whitespace around it), so that a trigger with no call after it is not read on
    to the end of the text."""
    # A literal of several markers is looked for by its first, and the rest must
    # follow it as _match reads it (other whitespace between the markers).
    head = _NAME_HEADS.get(literal) or _name_head(literal)
    # Most often the literal is near: looked for in a window that far first (the
    # first found there is the first anywhere), the reach worked out only if not.
    found = _read_to(text, at, head, at + _NAME_WINDOW)
    if found is None and at + _NAME_WINDOW < len(text):
        core = (_SPLIT.get(head) or _split(head))[1]
        found = _read_to(text, at, head, _name_reach(text, at) + len(core))
    if found is None or len(head) == len(literal):
        return found
    end = _match(text, found[0], literal)
    return (found[0], end) if end >= 0 else None


def _name_head(literal):
    """What a name's closing ``literal`` is looked for by: the literal itself, or,
    where it is several markers, its leading whitespace and first piece."""
    pieces = _pieces(literal)[0]
    head = literal
    if len(pieces) > 1:
        head = literal[: len(literal) - len(literal.lstrip())] + pieces[0]
    if len(_NAME_HEADS) < 256:  # literals are the format's
        _NAME_HEADS[literal] = head
    return head


_NAME_HEADS: dict = {}
_NAME_WINDOW = 512


def _name_reach(text, at):
    """How far a name that _good_name takes, written from ``at``, reaches: past
    whitespace, a word of at most one character more than a name has, and the
    whitespace after it, however long. (str.split finds the word's end some ten
    times faster than a pattern's ``\\S{0,257}``.)"""
    start = _skip_space(text, at)
    head = text[start : start + _LONGEST_NAME + 1].split(None, 1)
    return _skip_space(text, start + len(head[0])) if head else start


def _stop_run(text, end, begun=(), once=False):
    """Where the end-of-turn markers written one after another that end
    ``text[:end]`` begin (``end`` where none does). Each marker counts once, and
    where one ends in another the longest written is read: a model may write the
    template's marker and then the tokenizer's eos (``<|im_end|><|endofturn|>``),
    and the markers of a run are bounded by the end-of-turn markers'. ``begun``: markers the run
    has already (one begun after it); ``once``: one marker only, as the template
    ends a turn (strict reading, as the grammars)."""
    at = end
    used = begun
    # (none ends the text, most often: one look for all of them)
    while text.endswith(_LONGEST_ENDS, 0, at):
        for stop in _LONGEST_ENDS:  # the first that ends it is the longest
            if text.endswith(stop, 0, at) and stop not in used:
                break
        else:
            return at
        at -= len(stop)
        if once:
            return at
        used = (*used, stop)
    return at


def _longest_first(markers):
    """``markers`` (those not empty, each once), longest first, the first of those
    as long kept first."""
    return tuple(sorted(dict.fromkeys(m for m in markers if m), key=len, reverse=True))


# The end-of-turn markers as ``_stop_run`` tries them.
_LONGEST_ENDS = _longest_first(_TURN_ENDS)
# How long a run of end-of-turn markers may be (``_stop_run``): each marker once.
_STOP_REACH = sum(map(len, _TURN_ENDS))


def _stop_at(text, once=False):
    """Where the end-of-turn markers that end ``text`` (whitespace after them aside)
    begin (``_stop_run``); ``len(text)`` where none does."""
    end = len(text)
    while end and text[end - 1].isspace():
        end -= 1
    if not text.endswith(_LONGEST_ENDS, 0, end):
        return len(text)  # (most often)
    at = _stop_run(text, end, once=once)
    return at if at < end else len(text)


def _stops_begin(text):
    """Where what may still turn out to be only end-of-turn markers at the end of
    ``text`` begins: whole markers (whitespace after them), or markers and then
    the beginning of one at the very end; ``len(text)`` where nothing may."""
    found = len(text)
    for stop in _TURN_ENDS:
        begun = _partial_at(text, stop)
        if begun < len(text):
            found = min(found, _stop_run(text, begun, (stop,)))
    return found if found < len(text) else _stop_at(text)


def _strip_stop(text, once=False):
    """Drop the end-of-turn markers (and whitespace) at the end of the text
    (``_stop_run``: one after another, each once, the longest where one ends in
    another; ``once``: the one marker the template writes, the longest)."""
    end = len(text)
    while end and text[end - 1].isspace():
        end -= 1
    if not text.endswith(_LONGEST_ENDS, 0, end):
        return text  # (most often: what _stop_at finds, without its call)
    return text[: _stop_at(text, once)]


def _stop_from(text, end):
    """Where the end-of-turn markers that end ``text[:end]`` (whitespace after them
    aside) begin, as ``_strip_stop`` finds them (``_stop_run``); ``end`` where none
    does."""
    kept = _space_before(text, end)
    if not text.endswith(_LONGEST_ENDS, 0, kept):
        return end  # (most often)
    at = _stop_run(text, kept)
    return at if at < kept else end


def _space_before(text, at):
    """Where the whitespace that ends ``text[:at]`` starts."""
    while at and text[at - 1].isspace():
        at -= 1
    return at


def _before_break(text):
    """``text`` less the turn break it ends with (TURN_BREAK: the template ended the
    turn after the content and opened a new one for the calls that follow)."""
    trimmed = text.rstrip()
    if TURN_BREAK and trimmed.endswith(TURN_BREAK):
        return trimmed[: len(trimmed) - len(TURN_BREAK)]
    return text


def _short_of_break(text, keep):
    """``keep`` (how much of ``text`` can be sent) less a turn break, whole or begun,
    that ends ``text[:keep]``: calls may follow it (TURN_BREAK)."""
    kept = text[:keep]
    if kept.endswith(TURN_BREAK):
        at = len(kept) - len(TURN_BREAK)
    else:
        at = _partial_at(kept, TURN_BREAK)
    return len(kept[:at].rstrip()) if at < len(kept) else keep


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
        whole = [marker for marker in markers + tuple(_TURN_ENDS) if marker]
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
    pattern, reach = _TAIL_PATTERNS.get(markers) or _tail_pattern(markers)
    found = pattern.search(text, max(0, len(text) - reach))
    cut = found.start() if found else len(text)
    # What comes before end-of-turn markers that end text[:cut], and the
    # whitespace before them (``_space_before(text, _stop_from(text, cut))``,
    # its two reads of the whitespace made once where no marker ends it).
    keep = _space_before(text, cut)
    if text.endswith(_LONGEST_ENDS, 0, keep):
        keep = _space_before(text, _stop_run(text, keep))
    if cut < len(text):
        # The tail held may also end a marker that ends the text (one that starts
        # as it ends: MiniMax's '[e~[', written twice).
        end = _space_before(text, len(text))
        if text.endswith(_LONGEST_ENDS, 0, end):
            keep = min(keep, _space_before(text, _stop_run(text, end)))
        else:
            keep = min(keep, end)
    return keep


def _undecided(head, markers):
    """Whether more text could still make ``head`` start with one of ``markers``."""
    return any(
        len(head) < len(marker) and marker.startswith(head) for marker in markers
    )


def _stops(*markers):
    """A pattern finding what stops a chunk from being plain text: a character
    that may start one of ``markers`` or an end-of-turn marker."""
    firsts = "".join(
        sorted({marker[0] for marker in markers + tuple(_TURN_ENDS) if marker})
    )
    return re.compile("[%s]" % re.escape(firsts) if firsts else "(?!)")


def _decided(text, literal):
    """Whether more text could still change what ``_match(text, 0, literal)`` says."""
    if text.startswith(literal):
        return True
    if literal.startswith(text):
        return False
    pieces, trail = _pieces(literal)
    at = _skip_space(text, 0)
    if at == len(text):
        return False  # whitespace, then maybe the literal
    for number, piece in enumerate(pieces):
        if number:
            at = _skip_space(text, at)  # between markers, any whitespace
        if not text.startswith(piece, at):
            # it cannot match any more, unless the text ends in a part of the piece
            return not piece.startswith(text[at:])
        at += len(piece)
    tail = text[at:]
    return not (trail and len(tail) < len(trail) and trail.startswith(tail))


def _maybe_stop(text):
    """Whether ``text`` may still turn out to be just end-of-turn markers, with
    whitespace around them (whitespace after a part of one ends that hope)."""
    if not any(_TURN_ENDS):
        return False
    head = text.lstrip()
    return _stops_begin(head) == 0


def _before_stop(text):
    """The earliest place where ``text`` may end once the output's final
    end-of-turn markers are dropped (``_strip_stop``), more text or not: before
    markers that end it, or before one begun at its end (``_partial_at`` of each,
    found at once); ``len(text)`` where neither is."""
    pattern, reach = _TAIL_PATTERNS.get(()) or _tail_pattern(())
    found = pattern.search(text, max(0, len(text) - reach))
    begun = found.start() if found else len(text)
    if not text.endswith(_LONGEST_ENDS, 0, _space_before(text, len(text))):
        return begun  # (most often: no marker ends it)
    return min(begun, _stop_from(text, len(text)))


def _apart(literal):
    """Whether no end-of-turn marker (whole or begun) can begin inside what
    ``_match`` reads of ``literal``, so that ``_before_stop(text) >= end`` wherever
    ``end = _match(text, 0, literal)`` matches: no marker starts with whitespace,
    and none agrees, over their common length, with what is left of a piece (or
    of the literal as written) from any of its characters. Made once per literal
    and table of markers (bounded: a suffix may name a key)."""
    found = _APART.get(literal)
    if found is not None and found[0] is _LONGEST_ENDS:
        return found[1]
    pieces = _pieces(literal)[0]
    apart = not any(
        marker[0].isspace()
        or any(
            piece[at : at + len(marker)] == marker[: len(piece) - at]
            for piece in (*pieces, literal)
            for at in range(len(piece))
        )
        for marker in _LONGEST_ENDS
    )
    if len(_APART) < 256:
        _APART[literal] = (_LONGEST_ENDS, apart)
    return apart


_APART: dict = {}


def _name_end(text, at, after, options):
    """Where a name (or id) written at ``at`` ends, when real outputs may end it with
    ``after`` or one of ``options`` ((literal, parts it skips), from reviewed
    overrides): (where the name ends, where the literal ends, parts skipped), for
    the literal found first (the longer one where two are found at one place), or
    None. A literal that is only whitespace or empty ends the name at its word's
    end. Each literal is looked for only as far as a name _good_name takes can
    reach (``_name_reach``: whitespace around it counts, however long), so a
    literal that is not written costs no more than that per call."""
    reach = _name_reach(text, at)
    best = None
    for literal, skip in ((after, 0),) + options:
        if literal.strip():
            core = (_SPLIT.get(literal) or _split(literal))[1]
            if text.find(core[0], at, reach + len(core)) < 0:
                continue  # (the common case where a try fails: one memchr)
            found = _read_to(text, at, literal, reach + len(core))
        else:
            stop = _word_end(text, at)
            found = (stop, _match(text, stop, literal)) if stop >= 0 else None
        if found is None or found[1] < 0:
            continue
        rank = (found[0], -len(literal.strip()))
        if best is None or rank < best[0]:
            best = (rank, found[0], found[1], skip)
    return None if best is None else best[1:]


def _close_any(text, at, literals):
    """The end of whichever of ``literals`` is written at ``at`` (the first that
    is), the end of the text where only whitespace is left (the server cut the
    stop marker) or where it ends inside one of them, or -1."""
    if at < 0:
        return -1
    for literal in literals:
        end = _match(text, at, literal)
        if end >= 0:
            return end
    if _skip_space(text, at) == len(text):
        return len(text)
    return len(text) if any(_cut_short(text, at, each) for each in literals) else -1


def _cut_short(text, at, literal, others=()):
    """Whether the text ends inside a closing ``literal`` written at ``at``: what is
    left is, whitespace aside, a proper beginning of it as ``_match`` reads it (the
    model or the server stopped in the closer), and of none of ``others``, what else
    may be written there (a beginning they share has two readings). A closer cut
    anywhere then closes what it closes, as one missing at the end does. Only a
    short rest is looked at (a call read costs no more than its closer)."""
    start = _skip_space(text, at)
    if len(text) - start > 2 * len(literal) + _CUT_SPACE:
        return False
    rest = text[start:].rstrip()
    if not rest or _decided(rest, literal):
        return False
    for other in others:
        if not other.strip() or not _decided(rest, other):
            return False  # it may become that instead
        if _match(rest, 0, other) >= 0:
            return False  # it is that
    return True


# How much whitespace a closer cut short may hold beyond twice its own length.
_CUT_SPACE = 64


def _content_opener(text):
    """(the length of the content's opener ``text`` starts with, the closer that
    goes with it): the template's, or where real outputs write others
    (CONTENT_STARTS), the longest written; (0, CONTENT_END) where none is."""
    for start, end in CONTENT_STARTS:
        if text.startswith(start):
            return len(start), end
    if not CONTENT_STARTS and CONTENT_START and text.startswith(CONTENT_START):
        return len(CONTENT_START), CONTENT_END
    return 0, CONTENT_END


# The content's openers, and the closers of those real outputs write besides the
# template's (CONTENT_STARTS).
_CONTENT_OPENERS = tuple(start for start, _ in CONTENT_STARTS) or (CONTENT_START,)
_CONTENT_CLOSERS = tuple(end for _, end in CONTENT_STARTS if end and end != CONTENT_END)


def _setting(enable_thinking):
    """The key of a thinking setting in the format's tables: True, False, or None for
    a request that gave none (the template's default)."""
    return None if enable_thinking is None else bool(enable_thinking)


def _opened_by_prompt(tools, enable_thinking):
    """Whether the prompt that the output follows opened the reasoning block (a
    template may open it only where no tools are given); None where it may have or
    not (a request that gave no switch, to a template whose default is undecided):
    then the block is read where its closer comes, and not where none does."""
    if TOOLS_CHANGE_OPENING and tools:
        return OPENED_WITH_TOOLS[_setting(enable_thinking)]
    return OPENED_BY_PROMPT[_setting(enable_thinking)]


def _opener(text):
    """The length of the reasoning opener ``text`` starts with (where real outputs
    spell it in more than one way, the longest written), or 0."""
    for start in REASONING_STARTS:
        if text.startswith(start):
            return len(start)
    return 0


# --- what the prompt ends with, written again (PROMPT_ENDS) --------------------------


class _Echo:
    """The output less what the generation prompt ends with, where the output starts
    with it (whitespace before it aside): an engine may hand over the prompt's last
    marker with the output (``<|start|>assistant<|channel|>final…``), and the
    output follows it. Fed in pieces or whole it writes the same text; once the
    start of the output has decided (``done``) it writes each piece as it comes."""

    def __init__(self):
        self.done = False
        # The whitespace the output starts with (set aside as it comes), and what
        # follows it while it may still be one of PROMPT_ENDS.
        self._space = []
        self._head = ""

    def feed(self, chunk):
        if self.done:
            return chunk
        if not self._head:
            text = chunk.lstrip()
            if len(text) < len(chunk):
                self._space.append(chunk[: len(chunk) - len(text)])
            chunk = text
        head = self._head = self._head + chunk
        undecided = not head  # (_undecided, in the same look at each end)
        for end in PROMPT_ENDS:
            if head.startswith(end):
                self.done = True
                self._space, self._head = [], ""
                return head[len(end) :]  # (the whitespace before it dropped too)
            undecided = undecided or (len(head) < len(end) and end.startswith(head))
        if undecided:
            return ""
        return self.finish()

    def finish(self):
        self.done = True
        text = "".join(self._space) + self._head
        self._space, self._head = [], ""
        return text


def _without_echo(text):
    """``text`` as _Echo writes it, read whole: less the first of PROMPT_ENDS it
    starts with (whitespace before it aside, and dropped with it)."""
    stripped = text.lstrip()
    for end in PROMPT_ENDS:
        if stripped.startswith(end):
            return stripped[len(end) :]
    return text


# --- a turn written as several messages (MESSAGE_OPENER) ------------------------------

# How far a message's header may reach: a name of 256 characters and the parts around it.
_HEADER_LIMIT = 512


def _header_heads():
    """What a message's header may begin with: what the headers the format writes
    (the reasoning's, the content's, a call's after its name) begin with alike, or
    where they begin unlike, the first piece of each; and a call's opener."""
    headers = [*REASONING_STARTS, *CONTENT_HEADERS]
    for hole, after, options in CALL_PARTS:
        if hole == "name":
            headers += [after] + [text for text, _ in options]
    headers = [header.strip() for header in headers if header.strip()]
    common = min(headers, key=len) if headers else ""
    for header in headers:
        while not header.startswith(common):
            common = common[:-1]
    heads = [common] if common else list(map(_head, headers))
    heads += map(_head, CALL_STARTS or (CALL_START,))
    return tuple(dict.fromkeys(head for head in heads if head))


_HEADER_HEADS = _header_heads() if MESSAGE_OPENER else ()
# Whether the template opens a message for each call after the first (the separator
# ends with the opener).
_OPENS_CALL = bool(MESSAGE_OPENER) and CALL_SEPARATOR.strip().endswith(
    MESSAGE_OPENER.strip()
)


def _in_order(header):
    """A message's header with a call's opener and name (its recipient) first, as
    the template writes them, where the model wrote other parts before them."""
    for start in CALL_STARTS or (CALL_START,):
        core = start.strip()
        at = header.find(core) if core else -1
        if at <= 0 or not header[at - 1].isspace():
            continue  # none, first already, or inside a word
        begin = len(header[:at].rstrip())
        end = _word_end(header, at + len(core))
        if end < 0:
            return header
        return header[begin:end] + header[:begin] + header[end:]
    return header


def _kind_of(header):
    """What a message with this header (its end included) holds: "reasoning",
    "content", "call", or "" for a header the format does not write."""
    for kind, starts in (("reasoning", REASONING_STARTS), ("content", CONTENT_HEADERS)):
        if any(_match(header, 0, start) == len(header) for start in starts):
            return kind
    if any(_match(header, 0, start) >= 0 for start in CALL_STARTS or (CALL_START,)):
        return "call"
    return ""


def _message_ends():
    """What ends a message another one follows: the format's message end, an
    end-of-turn marker."""
    return tuple(marker for marker in (MESSAGE_END, *_TURN_ENDS) if marker)


_MESSAGE_ENDS = _message_ends() if MESSAGE_OPENER else ()


def _before_opener(text):
    """How much of ``text`` (inside a message) can be written: all but a tail that
    may still become the next message's opener, or what ends a message and it."""
    pattern, reach = _tail_pattern(_OPENER_TAILS)
    found = pattern.search(text, max(0, len(text) - reach))
    return found.start() if found else len(text)


def _opener_tails():
    """A message's opener, and each end of a message followed by it."""
    return (MESSAGE_OPENER,) + tuple(
        marker + MESSAGE_OPENER for marker in _MESSAGE_ENDS
    )


_OPENER_TAILS = _opener_tails() if MESSAGE_OPENER else ()


class _Messages:
    """A turn the model wrote as several messages, written as the template writes
    one turn, for the readers.

    Each message after the first opens with MESSAGE_OPENER (the prompt opened the
    first) and has a header, up to HEADER_END, that says what it holds. A call's
    opener and name written after other parts of the header are written first; a
    header whose message holds content is written as the content's opener; and
    where one message follows another, what stands between them is written as the
    template writes those parts of one turn: between two calls the template's
    separator, between a call and the content after it nothing but the call's
    closer; between content and a call after it, or two messages of content, a
    line break (what ends the content's message and the opener dropped): texts of
    the answer written apart are joined as lines. After
    reasoning, and where a header is none the format writes, the text stays as it
    is. Fed in pieces or whole it writes the same text: parse reads what it writes
    of the whole output, the stream what it writes as the output arrives."""

    def __init__(self):
        self._pending = ""  # read, not yet written
        self._head = True  # the pending text starts where a message does
        self._first = True  # ... the first message
        self._kind = ""  # what the message read last holds (_kind_of)
        self._between = ""  # the end-of-turn marker before the next message's opener
        self._looked = 0  # how much of a header-to-be has been looked through
        self._space = []  # the whitespace before a header-to-be (set aside as it comes)

    def feed(self, chunk):
        self._pending += chunk
        return self._write(False)

    def finish(self):
        return self._write(True)

    def _write(self, final):
        written = []
        while True:
            if self._head:
                text = self._header(final)
                if text is None:
                    break  # more text decides
                written.append(text)
                continue
            pending = self._pending
            at = pending.find(MESSAGE_OPENER)
            if at < 0:
                keep = len(pending) if final else _before_opener(pending)
                written.append(pending[:keep])
                self._pending = pending[keep:]
                break
            self._between = ""
            for end in _MESSAGE_ENDS:
                if pending.endswith(end, 0, at):
                    self._between = end
                    break
            written.append(pending[: at - len(self._between)])
            self._pending = pending[at + len(MESSAGE_OPENER) :]
            self._head, self._looked = True, 0
        return "".join(written)

    def _header(self, final):
        """At a message's start: the text for what stands before it and its header,
        once more text cannot change it (None until then)."""
        lead = _skip_space(self._pending, 0)
        if lead:
            self._space.append(self._pending[:lead])
            self._pending = self._pending[lead:]
        head = self._pending
        end = -1
        if any(head.startswith(first) for first in _HEADER_HEADS):
            # (what was looked through while more text was awaited is not again)
            looked = max(0, self._looked - len(HEADER_END) - len(MESSAGE_OPENER))
            end = head.find(HEADER_END, looked, _HEADER_LIMIT)
            reach = end if end >= 0 else _HEADER_LIMIT
            if head.find(MESSAGE_OPENER, looked, reach) >= 0:
                end = -2  # a message opens before this header would end: none
            elif end < 0 and not final and len(head) < _HEADER_LIMIT:
                self._looked = len(head)
                return None
        elif not final and (not head or _undecided(head, _HEADER_HEADS)):
            return None
        self._head = False
        space = "".join(self._space)
        self._space = []
        if end < 0:
            # No header: the text stays as it is.
            text = "" if self._first else self._between + MESSAGE_OPENER
            self._first, self._kind, self._between = False, "", ""
            self._pending = space + head
            return text
        header = _in_order(head[: end + len(HEADER_END)])
        self._pending = head[end + len(HEADER_END) :]
        kind = _kind_of(header)
        text = self._joined(kind, space, header)
        self._first, self._kind, self._between = False, kind, ""
        return text

    def _joined(self, kind, space, header):
        """What is written for the boundary before a message of ``kind`` and its
        ``header`` (``space``: the whitespace written before the header)."""
        if kind == "content":
            header = CONTENT_START
        if self._first:
            return space + header
        before, previous = self._between, self._kind
        if previous == "call" and kind == "call" and _OPENS_CALL:
            return before + MESSAGE_OPENER + space + header  # as the template writes it
        if previous == "call" and kind in ("call", "content"):
            return before + (CALL_SEPARATOR + header if kind == "call" else "")
        if previous == "content" and kind == "call":
            return "\n" + header.lstrip()
        if previous == "content" and kind == "content":
            return "\n"
        return before + MESSAGE_OPENER + space + header


def _in_messages(text):
    """``text`` as _Messages writes it, read whole."""
    messages = _Messages()
    return messages.feed(text) + messages.finish()
