"""``StreamParser``: a model's output read as it arrives.

The reader is one generator, ``_read``, written in the same order as ``parse``:
reasoning, content, the calls, what follows them. When it needs text that has not
arrived yet it yields, and the next ``feed`` resumes it where it stopped, so every
character is looked at a bounded number of times: a chunk costs time in proportion
to its length, never a rescan of what came before.

Only text that is not settled stays pending: a tail that may still become a marker,
an end-of-turn marker at the end, trailing whitespace (``parse`` strips it), and the
part of a call being read that cannot be sent yet. Whatever a call turns out to be,
the text it was read from is kept until the call is whole, so a call that proves
broken goes back to being content, as it does in ``parse``.
"""

from __future__ import annotations

import json
import re

from .calls import (
    _KEY_MARK,
    _TRAILING_MARKERS,
    _UNIT_TRIES,
    _after_calls,
    _after_units,
    _attributed,
    _follows_value,
    _key_at,
    _left_out,
    _next_try,
    _read_call,
    _string_goes_on,
    _trailing,
)
from .format import (
    ARG_KEY_END,
    ARG_KEY_PREFIX,
    ARG_SEPARATOR,
    ARG_STRING_CLOSE,
    ARG_STRING_OPEN,
    ARG_STRING_QUOTES_ALSO,
    ARG_VALUE_START,
    ARG_VALUE_SUFFIX,
    ARGUMENTS_PATH,
    BARE_CALLS,
    CALL_END,
    CALL_MEMBERS,
    CALL_PARTS,
    CALL_PREFIXES,
    CALL_SEPARATOR,
    CALL_START,
    CALL_STARTS,
    CONTENT_AS_UNIT,
    CONTENT_END,
    CONTENT_OPENED,
    CONTENT_WRAPPED,
    ELEMENTS,
    END_AFTER_CALLS,
    FLAT_FIELDS,
    HAS_CALLS,
    HAS_REASONING,
    ID_PATH,
    JSON_ARGUMENTS,
    JSON_CALLS,
    KEY_ALSO,
    KEY_ESCAPES,
    LITERAL,
    MESSAGE_OPENER,
    NAME_ESCAPES,
    NAME_IS_KEY,
    NAME_PATH,
    OPTIONAL_PARTS,
    OWN_VALUES,
    PROMPT_ENDS,
    QUOTED_STRINGS,
    RAW_STRINGS,
    REASONING_END,
    REASONING_STARTS,
    SECTION_BEFORE_CONTENT,
    SECTION_END,
    SECTION_START,
    SECTION_STARTS,
    SUFFIXED_VALUES,
    TRIGGER_ALSO,
    TURN_BREAK,
    TYPED_VALUES,
    VALUE_ESCAPES,
    VALUE_SUFFIX_NAMES_KEY,
    VERBATIM_CLOSE,
    VERBATIM_OPEN,
)
from .text import (
    _CONTENT_CLOSERS,
    _CONTENT_OPENERS,
    _LONGEST_ENDS,
    _LONGEST_NAME,
    _SEEK,
    _SEEKS,
    _SEPARATOR_SEEK,
    _apart,
    _before,
    _before_break,
    _before_stop,
    _content_opener,
    _cut_short,
    _decided,
    _Echo,
    _good_name,
    _match,
    _maybe_stop,
    _Messages,
    _name_end,
    _name_head,
    _opened_by_prompt,
    _opener,
    _partial_at,
    _seek,
    _setting,
    _settled,
    _short_of_break,
    _STOP_REACH,
    _stop_at,
    _stops,
    _stops_begin,
    _strip_stop,
    _trim_end,
    _undecided,
    _word_end,
)
from .tools import _schema_types
from .values import (
    _ENCODE_STRING,
    _JSON_SPACE,
    _element_patterns,
    _elements_value,
    _ElementsEnd,
    _unescaped,
    _json_text,
    _load,
    _own_typed,
    _OwnEnd,
    _python_string,
    _typed,
    _ValueEnd,
)


class _Broken(Exception):
    """The tool call being read is not well-formed."""


def _prefix_tail(*markers):
    """A function giving where, in a text, a proper prefix of one of ``markers``
    ends it: the leftmost such place, as ``_partial_at`` finds it for each, or the
    text's length. A marker may name a key the model wrote (MiniMax M3's value
    closer repeats it), so nothing is kept per marker, and nothing made costs more
    than time in proportion to the marker's length: each place that may start it
    (of the text's last ``len(marker) - 1`` characters) is tried as it is, a few of
    them, and past those the rest is read once against the marker's border table."""
    written = [marker for marker in markers if marker]
    tables: dict = {}  # marker -> its border table, made when first needed

    def tail(text):
        start = len(text)
        for marker in written:
            at = text.find(marker[0], max(0, len(text) - len(marker) + 1))
            for _ in range(4):
                if not 0 <= at < start or marker.startswith(text[at:]):
                    break
                at = text.find(marker[0], at + 1)
            else:
                if 0 <= at < start:
                    borders = tables.get(marker) or tables.setdefault(
                        marker, _borders(marker)
                    )
                    at = _border_start(text, at, marker, borders)
            if 0 <= at < start:
                start = at
        return start

    return tail


def _pattern_tail(*markers):
    """(search, reach): ``_prefix_tail(*markers)`` as one pattern searched for in C
    in a text's last ``reach`` characters, for markers the format itself writes (a
    value's suffix that names no key): making the pattern costs time in the square
    of a marker's length, paid once per format."""
    written = [marker for marker in markers if marker]
    prefixes = {marker[:size] for marker in written for size in range(1, len(marker))}
    alternatives = "|".join(map(re.escape, sorted(prefixes)))
    search = re.compile("(?:%s)\\Z" % alternatives if prefixes else "(?!)").search
    return search, max(map(len, written), default=0)


def _value_tail(suffix, mark):
    """Where a value written up to ``suffix`` (``mark``: the next unit's key, or
    "") may still be cut: ``_prefix_tail`` of the suffix's core, with and without
    the whitespace it opens with, and of the mark, as (search, reach, None) from
    ``_pattern_tail`` for the suffixes the format writes (``_OWN_SUFFIXES``, kept:
    a few per format), else (None, 0, the tail function): one that names a key
    (MiniMax M3's) is read afresh, in time linear in its length."""
    found = _VALUE_TAILS.get((suffix, mark))
    if found is None:
        core = suffix.strip()
        lead = suffix[: len(suffix) - len(suffix.lstrip())]
        if suffix not in _OWN_SUFFIXES:
            return None, 0, _prefix_tail(lead + core, core, mark)
        search, reach = _pattern_tail(lead + core, core, mark)
        found = _VALUE_TAILS[suffix, mark] = (search, reach, None)
    return found


# The value suffixes the format writes as they are (no key named in them).
_OWN_SUFFIXES = tuple(
    suffix
    for suffix in (ARG_STRING_CLOSE, "" if VALUE_SUFFIX_NAMES_KEY else ARG_VALUE_SUFFIX)
    if suffix.strip()
)
_VALUE_TAILS: dict = {}


def _borders(marker):
    """Knuth-Morris-Pratt's table of ``marker``: for each of its prefixes, the
    length of the longest proper prefix that also ends it."""
    borders = [0] * len(marker)
    size = 0
    for at in range(1, len(marker)):
        while size and marker[at] != marker[size]:
            size = borders[size - 1]
        if marker[at] == marker[size]:
            size += 1
        borders[at] = size
    return borders


def _border_start(text, at, marker, borders):
    """Where the longest proper prefix of ``marker`` that ends ``text`` starts (one
    that starts at ``at`` or later), or len(text): the text from ``at`` read once
    against ``marker``."""
    size = 0
    for char in text[at:]:
        while size and (size == len(marker) or marker[size] != char):
            size = borders[size - 1]
        if marker[size] == char:
            size += 1
    if size == len(marker):
        size = borders[size - 1]  # the whole marker: only a proper prefix counts
    return len(text) - size


def _final_stop_apart(text):
    """(``text`` less its final end-of-turn markers, those markers with the
    whitespace after them), the markers found as ``_strip_stop`` finds them."""
    at = _stop_at(text)
    return text[:at], text[at:]


def _maybe_cut(text, closers, others):
    """Whether ``text`` may still turn out to be one of ``closers`` cut short
    (``_cut_short``: ``parse`` reads it as closing), perhaps followed by whitespace
    and the output's final end-of-turn markers (which ``parse`` strips)."""
    if any(_cut_short(text, 0, each, others) for each in closers):
        return True
    at = _stops_begin(text)
    return at < len(text) and any(
        _cut_short(text[:at], 0, each, others) for each in closers
    )


def _search_from(search, pending):
    """Where triggers are looked for in ``pending`` from, once what was before
    ``search`` was sent or held: no further than its end, since the whitespace
    ``_hold`` keeps apart can hold no trigger (a trigger is looked for by its first
    marker, which starts with none). Past the end, a run of whitespace fed a chunk
    at a time would go through the reader, and read again, with every chunk."""
    return min(max(0, search), len(pending))


def _joined(deltas):
    """``deltas`` with each run of argument pieces for one call joined into one."""
    out: list = []
    run: list = []
    for delta in deltas + [{}]:
        parts = delta.get("tool_calls")
        if (
            parts
            and list(delta) == ["tool_calls"]
            and list(parts[0]) == ["index", "function"]
        ):
            if run and run[0]["tool_calls"][0]["index"] == parts[0]["index"]:
                run.append(delta)
                continue
        if run:
            pieces = [d["tool_calls"][0]["function"]["arguments"] for d in run]
            run[0]["tool_calls"][0]["function"]["arguments"] = "".join(pieces)
            out.append(run[0])
            run = []
        if parts and list(delta) == ["tool_calls"]:
            run = [delta]
        elif delta:
            out.append(delta)
    return out


def _is_json(text):
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return False
    return True


def _decoded(text):
    """The value a piece of JSON the reader has read denotes."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        raise _Broken from None


# Where the word a name is written as ends (``\s`` is exactly str.isspace).
_FIRST_SPACE = re.compile(r"\s").search
# How many pieces of a value a run keeps before it joins them into one.
_BLOCK = 64
# What stops a chunk of reasoning or content from being sent as it is.
_REASONING_STOPS = (
    _stops(REASONING_END, *_SEEKS) if TRIGGER_ALSO else _stops(REASONING_END, _SEEK)
)
_CONTENT_STOPS = (
    _stops(CONTENT_END, TURN_BREAK, *_SEEKS, *_CONTENT_CLOSERS)
    if TRIGGER_ALSO or _CONTENT_CLOSERS
    else (
        _stops(_SEEK, CONTENT_END, TURN_BREAK)
        if TURN_BREAK
        else _stops(_SEEK, CONTENT_END)
    )
)
# ... and of content that is a unit of the turn (CONTENT_AS_UNIT), which a call
# separator may end.
_UNIT_STOPS = _stops(_SEPARATOR_SEEK)
# ... and of text after calls, where end-of-turn markers are dropped.
_AFTER_STOPS = (
    _stops(*_SEEKS, *END_AFTER_CALLS)
    if TRIGGER_ALSO
    else _stops(_SEEK, *END_AFTER_CALLS)
)


def _past_broken(text, start, first, types):
    """Where calls are looked for once those read from ``start`` proved broken:
    ``first`` (past their trigger's opener), or, where they were read on past
    later triggers, ``_LOOKBACK`` characters before the end of the shortest piece
    ``text[start:end]`` from which the stream's reader (``types``: the tools'
    value types) finds them broken, more text or not after it (the end of
    ``text`` if none does).

    The reader decides only what more text cannot change, so how the text is cut
    does not matter: it is read in pieces growing to 1,024 characters (its
    pending text stays short: it is copied as the reader reads on); where a
    trigger may fall on either side of the place by where in the piece it is, a
    new reader reads to that piece and it in pieces of 32, then of one."""

    found = _seek(text, first) if TRIGGER_ALSO else text.find(_SEEK, first)
    if found < 0 or found + _LOOKBACK >= len(text):
        return first  # no trigger is left to skip, or the next is tried anyway

    def unsure(low, high):
        # whether a trigger from ``first`` on is skipped or not by where in
        # text[low:high] the calls proved broken
        where = max(first, low - _LOOKBACK + 1)
        found = _seek(text, where) if TRIGGER_ALSO else text.find(_SEEK, where)
        return 0 <= found and found + _LOOKBACK < high

    # (the first piece reaches past the next trigger by _LOOKBACK: most broken
    # calls prove broken in it, and the next trigger is tried)
    step = max(32, min(1024, found + _LOOKBACK - start))
    low, high = _probe(text, start, len(text), types, start, step, True)
    if high < 0:
        return max(first, len(text) - _LOOKBACK)
    for step in (32, 1):
        if high - low <= 1 or not unsure(low, high):
            break
        low, high = _probe(text, start, high, types, low, step, False)
    # (where no trigger is unsure, this is where the shortest piece ends, less
    # _LOOKBACK, whatever pieces found it)
    return max(first, high - _LOOKBACK)


def _probe(text, start, stop, types, fine, step, grow):
    """(start, end) of the piece of ``text[start:stop]`` with which the reader finds
    the calls broken (or read: parse found them broken, so they are no further),
    given pieces of 1,024 characters up to ``fine``, then of ``step`` (growing to
    1,024 if ``grow``); (-1, -1) while it waits for more."""
    probe = StreamParser()
    probe._types = types
    reader = probe._read_calls()
    at = start
    try:
        while at < stop:
            if at < fine:
                end = min(fine, at + 1024)
            elif grow:
                end = min(stop, at + min(1024, max(step, at - fine)))
            else:
                end = min(stop, at + step)
            piece = text[at:end]
            low, at = at, end
            run = probe._run  # as feed() takes a chunk
            if run is not None and run(piece) is not None:
                continue
            probe._pending += piece
            next(reader)
    except (StopIteration, _Broken):
        return low, at
    except Exception:  # a reader bug: the stream reads the rest as content
        return low, at
    finally:
        # The reader and the probe refer to each other: undone, the probe is
        # freed now, not at the next collection (many probes may run).
        reader.close()
        probe._reader.close()
        probe._run = None
    return -1, -1


# The longest piece of a chunk the reader is given at once, and the length past which
# a delta's text is not added to (the next text makes a delta of its own).
_FEED_PIECE = 4096
_DELTA_PIECE = 4096

# How far before the place where broken calls proved broken calls are looked for
# again: the text that proved them broken may be the opener of the next call (a
# broken call's closer is looked for there).
_LOOKBACK = 256


class StreamParser:
    """Reads a model's output as it arrives.

    ``feed(chunk)`` returns the deltas (shaped like OpenAI's ``choices[0].delta``)
    that the text read so far settles; ``finish()`` returns the rest. Merged, they
    equal ``parse(whole_text)`` for text that fits the format, however it is cut;
    for text that does not, nothing is lost and nothing raises. Only a tail that
    may still become a marker is held back, and the character that would complete
    a call's arguments until the call is confirmed.

    A call that turns out malformed is abandoned: its index is listed in
    ``abandoned``, the arguments sent for it never parse as JSON, its index is not
    used again, and its text is sent again as content. The deltas with the
    abandoned calls left out always merge into ``parse(whole_text)``.
    """

    def __init__(self, *, tools=None, enable_thinking=None):
        # Whether the prompt opened the reasoning block (a template may open it only
        # where no tools are given); None: it may have (``parse``).
        self._prompt_opened = (
            _opened_by_prompt(tools, enable_thinking) if HAS_REASONING else False
        )
        # Text that is reasoning only if a delimiter follows it.
        self._maybe_reasoning = []
        # Whether the whole output is read and the reasoning's closer is not in what
        # is left of it: then it is in no later part either.
        self._no_closer = False
        # The output's rest, read again a piece at a time (last piece first) once
        # the reader held all of it to find the closer (``_requeue``).
        self._backlog = []
        # Whether the prompt wrote the content's opener: its closer ends the content.
        self._content_opened = (
            CONTENT_OPENED[_setting(enable_thinking)] if CONTENT_WRAPPED else False
        )
        # What closes the content: its closer, or that of the other opener real
        # outputs write (CONTENT_STARTS), once the content opens with it.
        self._content_end = CONTENT_END
        self._types = _schema_types(tools if TYPED_VALUES else None)
        self._pending = ""  # text read but not yet settled
        # An end-of-turn marker (and whitespace) that ends the text so far: kept
        # from the reader, since parse strips it before reading when it ends the
        # output, until more text follows it.
        self._tail = ""
        # Whitespace held back after the pending text (none, or a final end-of-turn
        # marker): kept apart so that a long run of it costs time in proportion to
        # its length, not again with every chunk.
        self._space = []
        self._eof = False
        self._deltas = []
        self._started = set()  # the fields that have sent text
        self._hold_from = None  # deltas from here on are held back
        self._held = ""  # content that is sent once the calls after it prove real
        # An end-of-turn marker that ended the content before the calls (with the
        # whitespace before it): dropped once the calls are confirmed, content again
        # if they are abandoned, as parse reads it.
        self._held_stop = ""
        self._opener = 0  # the length of the content's opening marker in it
        self._after = False  # whether calls were read: the text is text after them
        self._before = ""  # the whitespace before the last calls read
        # The whitespace written before the calls being read, and, once they are
        # read, with that after them: it joins the content before them to the text
        # after them (sent with that text, if there is content before; then None).
        self._gap = None
        self._stop_cut = False  # finish() found the end-of-turn marker pending
        self._raw = []  # the pieces of the calls being read, for a replay
        self.abandoned = []  # the indices of calls sent in part, then found malformed
        self._next_index = 0  # the index the next call gets
        self._opened = []  # the calls sent since the last confirmed one
        self._completing = {}  # index → what completes its arguments, held back
        # The ids the calls sent and not abandoned have, and index → id: a call
        # repeating one gets none (as ``_unique_ids`` has it).
        self._ids, self._id_of = set(), {}
        # While the reader waits inside plain text (content, reasoning, a value),
        # how it takes a chunk without being resumed: the chunk's deltas, or None
        # when the chunk needs the reader.
        self._run = None
        self._reader = self._read()
        # What the prompt ends with, written again where the output starts (None
        # once the start of the output has decided).
        self._echo: _Echo | None = _Echo() if PROMPT_ENDS else None
        # Whether feed() still hands its chunks to _unwrap (the echo or the
        # messages may still read them): one look per chunk, not two.
        self._wrapped = bool(PROMPT_ENDS or MESSAGE_OPENER)
        if MESSAGE_OPENER:
            # A turn of several messages, written as the template writes one turn
            # before the reader reads it (None once finish() has written the rest).
            self._messages: _Messages | None = _Messages()

    def feed(self, chunk):
        """The deltas that the text read so far settles."""
        if self._wrapped and type(chunk) is str:
            chunk = self._unwrap(chunk)
        run = self._run  # None once finish() has run
        if run is not None and type(chunk) is str:
            deltas = run(chunk)
            if deltas is not None:
                return deltas  # the reader still waits where it was
        if not isinstance(chunk, str):
            raise TypeError("feed() takes the model's output as a str")
        if self._eof:
            raise ValueError("feed() after finish()")
        if len(chunk) > _FEED_PIECE:
            # A long chunk is read a piece at a time: the text the reader holds
            # stays short, so a try at calls that prove broken (their text read
            # again as content) costs time in proportion to the piece, not to all
            # that came with it.
            deltas = []
            if MESSAGE_OPENER:
                messages, self._messages = self._messages, None  # (written already)
            for at in range(0, len(chunk), _FEED_PIECE):
                deltas += self.feed(chunk[at : at + _FEED_PIECE])
            if MESSAGE_OPENER:
                self._messages = messages
            return deltas
        if chunk:
            text = self._pending + "".join(self._space) + self._tail + chunk
            self._space = []
            if text[-1].isspace() or text.endswith(_LONGEST_ENDS):
                at = _stop_at(text)
                self._pending, self._tail = text[:at], text[at:]
            else:  # (most often: what _stop_at finds, without its call)
                self._pending, self._tail = text, ""
            self._step()
            if self._hold_from is not None or self._tail:
                self._run = None  # the next chunk goes through the reader
        return self._take()

    def _unwrap(self, chunk):
        """``chunk`` as the reader reads it: the prompt's echo dropped from the
        output's start, a turn's messages written as the template writes one."""
        if PROMPT_ENDS and self._echo is not None:
            chunk = self._echo.feed(chunk)
            if self._echo.done:
                self._echo = None
                self._wrapped = bool(MESSAGE_OPENER)  # (feed's one look per chunk)
        if MESSAGE_OPENER and self._messages is not None:
            chunk = self._messages.feed(chunk)
        return chunk

    def finish(self):
        """The remaining deltas, once the output has ended."""
        early: list = []
        if PROMPT_ENDS and self._echo is not None and not self._eof:
            rest, self._echo = self._echo.finish(), None
            early = self.feed(rest)
        if MESSAGE_OPENER and self._messages is not None and not self._eof:
            rest, self._messages = self._messages.finish(), None
            early += self.feed(rest)
        if not self._eof:
            self._eof = True
            self._run = None
            self._pending += "".join(self._space)
            self._space = []
            if self._tail:  # the final end-of-turn marker, which parse strips
                self._stop_cut = True
            else:
                trimmed = _strip_stop(self._pending)
                self._stop_cut = trimmed != self._pending
                self._pending = trimmed
            self._step()
            self._run = None  # at the end of the output the reader waits for nothing
        return early + self._take()

    def _step(self):
        try:
            next(self._reader, None)
            while self._backlog:  # the output's rest, read again (_requeue)
                self._pending += "".join(self._space) + self._backlog.pop()
                self._space = []
                self._eof = not self._backlog
                next(self._reader, None)
        except Exception:  # a reader bug must not lose text: the rest is content
            self._run = None
            if self._hold_from is not None:
                del self._deltas[self._hold_from :]  # held back: never sent
                self._hold_from = None
                self._opened = []
            self._abandon()
            unsent = self._held + self._held_stop + "".join(self._raw)
            unsent += "".join(self._maybe_reasoning) + self._pending
            self._maybe_reasoning = []
            if self._backlog:  # the output has ended: its rest is all there is
                unsent += "".join(self._space) + "".join(reversed(self._backlog))
                self._space = []
                self._backlog = []
                self._eof = True
            self._held = self._held_stop = ""
            self._raw = []
            self._pending = unsent
            self._reader = self._rest_as_content()
            next(self._reader, None)

    def _rest_as_content(self):
        while True:
            self._emit("content", self._pending)
            self._pending = ""
            if self._eof:
                return
            yield

    def _take(self):
        if self._hold_from is None:
            deltas, self._deltas = self._deltas, []
            return deltas
        # What may still turn out to be calls stays back.
        deltas = self._deltas[: self._hold_from]
        del self._deltas[: self._hold_from]
        self._hold_from = 0
        return deltas

    def _emit(self, field, text):
        """Add ``text`` to the ``field`` delta being made, or make one. A delta
        grows only to ``_DELTA_PIECE`` characters: its text is copied at each
        addition, and a step that reads much (the rest of the output, read again
        once it has ended) adds many."""
        if not text:
            return
        last = self._deltas[-1] if self._deltas else None
        if (
            last is not None
            and list(last) == [field]
            and len(last[field]) < _DELTA_PIECE
        ):
            last[field] += text
        else:
            self._deltas.append({field: text})

    def _send(self, field, text, final=False):
        """Send content or reasoning as ``parse`` strips it: no leading whitespace,
        and none at the end once ``final``."""
        if field not in self._started:
            text = text.lstrip()
        if final:
            text = text.rstrip()
        if text:
            if field == "content" and self._gap is not None:
                if field in self._started:
                    self._emit(field, self._gap)
                self._gap = None
            self._started.add(field)
            self._emit(field, text)

    def _hold(self, rest):
        """Hold back ``rest``, the text read but not sent. Whitespace after nothing
        or after a final end-of-turn marker (more of it changes nothing) waits in
        ``_space``."""
        kept = rest.rstrip()
        if len(kept) < len(rest) and (not kept or kept.endswith(_LONGEST_ENDS)):
            self._space.append(rest[len(kept) :])
            rest = kept
        self._pending = rest

    def _text_run(self, field, stops):
        """The run of plain ``field`` text: once it has started, pending text and a
        chunk in which ``stops`` finds nothing are sent as the reader would send
        them, all but trailing whitespace."""

        def take(chunk):
            if chunk.isspace() and (self._space or not self._pending):
                self._space.append(chunk)
                return []
            text = self._pending + "".join(self._space) + chunk
            if field not in self._started or stops.search(text):
                return None
            self._space = []
            kept = text.rstrip()
            self._hold(text[len(kept) :])
            return [{field: kept}] if kept else []

        return take

    def _read(self):
        called = False  # calls ended the reasoning
        if HAS_REASONING:
            called = yield from self._read_reasoning()
        if not HAS_CALLS:
            yield from self._read_content()
        elif BARE_CALLS:
            yield from self._read_calls_or_content()
        else:
            yield from self._read_content_and_calls(called)

    def _read_reasoning(self):
        """The reasoning block, if the output has one. True when calls that start
        before its closer ended it (they are read; the text after them follows)."""
        if REASONING_STARTS:
            # Wait until the start of the output tells whether a block opens (the
            # whitespace it starts with counts for nothing: it is dropped as it comes).
            markers = REASONING_STARTS + (REASONING_END,)
            while not self._eof and _undecided(self._pending.lstrip(), markers):
                self._pending = self._pending.lstrip()
                yield
            head = self._pending.lstrip()
            opener = _opener(head)
            if opener:
                self._pending = head[opener:]
            elif head.startswith(REASONING_END) and not self._prompt_opened:
                # A closer with no opener: an empty block whose opener was elided.
                self._pending = head[len(REASONING_END) :]
                return False
            elif self._prompt_opened is None:
                # The prompt may have opened the block (an undecided default): the
                # text is reasoning only if the closer comes.
                if not (yield from self._closer_comes()):
                    return False  # an answer
            elif not self._prompt_opened:
                return False
        elif not self._prompt_opened:
            # No marker opens the block, and the history writes answers without the
            # delimiter: the text is reasoning only if the delimiter comes.
            if not (yield from self._closer_comes()):
                return False  # an answer
        run = self._text_run("reasoning_content", _REASONING_STOPS)
        search = 0  # a trigger is looked for from here on
        while True:
            pending = self._pending
            end = -1 if self._no_closer else pending.find(REASONING_END)
            at = -1
            if HAS_CALLS and not BARE_CALLS and end < 0:
                if TRIGGER_ALSO:
                    at = _seek(pending, search)
                else:
                    at = pending.find(_SEEK, search)
            if at >= 0:
                start = len(pending[:at].rstrip())
                self._send("reasoning_content", pending[:start])
                self._pending = pending[start:]
                if (yield from self._closer_follows()):
                    continue  # the calls are text of the block: it goes on to there
                # No closer follows: calls end the block if they are well-formed.
                self._opener = 0
                search = yield from self._try_calls(at - start)
                if search < 0:
                    return True
                continue
            if end >= 0:
                self._send("reasoning_content", pending[:end], final=True)
                self._pending = pending[end + len(REASONING_END) :]
                return False
            if self._eof:
                self._send("reasoning_content", pending, final=True)
                self._pending = ""
                return False
            watch = (_SEEK,) if HAS_CALLS else ()
            if TRIGGER_ALSO:
                watch = _SEEKS if watch else ()
            keep = _settled(pending, (REASONING_END,) + watch)
            self._send("reasoning_content", pending[:keep])
            self._hold(pending[keep:])
            search = _search_from(search - keep, self._pending)
            self._run = None if search else run
            yield
            self._run = None

    def _closer_comes(self):
        """Whether the reasoning's closer comes before the output ends, where nothing
        opened the block. The text waits in _maybe_reasoning until then (the pending
        text is copied with every chunk), but for as much as may still be the closer
        or an end-of-turn marker; where no closer comes, the rest comes again a piece
        at a time (``_requeue``)."""
        margin = max(len(REASONING_END), _STOP_REACH)
        while not self._eof and REASONING_END not in self._pending:
            cut = max(0, len(self._pending) - margin)
            self._maybe_reasoning.append(self._pending[:cut])
            self._pending = self._pending[cut:]
            yield
        self._pending = self._rejoined(self._maybe_reasoning)
        if REASONING_END in self._pending:
            return True
        self._requeue()
        return False

    def _closer_follows(self):
        """Whether the reasoning's closer comes before the output ends, the text from
        here on held back until it is known (``parse``: calls in a block that its
        closer follows are its text). Each piece is looked at once: what cannot
        hold the closer waits in ``_maybe_reasoning``; once the output is read and
        the closer is not in it, it is not looked for again (a run of triggers in an
        unclosed block would each look to the end)."""
        if self._no_closer:
            return False
        held = self._maybe_reasoning
        # (what may still be the closer, or the end-of-turn marker feed keeps apart)
        margin = max(len(REASONING_END), _STOP_REACH)
        while not self._eof and REASONING_END not in self._pending:
            cut = max(0, len(self._pending) - margin)
            held.append(self._pending[:cut])
            self._pending = self._pending[cut:]
            yield
        self._pending = self._rejoined(held)
        found = REASONING_END in self._pending
        if self._eof and not found:
            self._no_closer = True
            self._requeue()
        return found

    def _requeue(self):
        """Once the output is read and the reader holds the rest of it, the rest
        comes again a piece at a time, as feed gives a long chunk (the output's end
        after the last piece): the tries at calls in it then cost time in
        proportion to a piece, not to all of it."""
        rest = self._pending
        if len(rest) <= _FEED_PIECE:
            return
        self._pending = rest[:_FEED_PIECE]
        pieces = range(_FEED_PIECE, len(rest), _FEED_PIECE)
        self._backlog = [rest[at : at + _FEED_PIECE] for at in reversed(pieces)]
        self._eof = False

    def _open_content(self):
        """How long the marker that opens the content is (0: none). The pending
        text then starts with it; the content's first closer is dropped."""
        while not self._eof and _undecided(self._pending.lstrip(), _CONTENT_OPENERS):
            self._pending = self._pending.lstrip()
            yield
        self._pending = self._pending.lstrip()
        size, self._content_end = _content_opener(self._pending)
        return size

    def _open_section(self):
        """Drop the calls' section opener that the content starts with, where a turn
        with calls writes its content inside the section (SECTION_BEFORE_CONTENT)."""
        opener = SECTION_BEFORE_CONTENT
        while not self._eof and _undecided(self._pending.lstrip(), (opener,)):
            self._pending = self._pending.lstrip()
            yield
        head = self._pending.lstrip()
        if head.startswith(opener):
            self._pending = head[len(opener) :]

    def _read_content(self):
        """The content: all that is left, its markers aside."""
        opener = (yield from self._open_content()) if CONTENT_WRAPPED else 0
        self._pending = self._pending[opener:]
        yield from self._read_plain(
            bool((opener or self._content_opened) and self._content_end)
        )

    def _read_plain(self, closing):
        """Content with no calls in it."""
        run = self._text_run("content", _CONTENT_STOPS)
        while True:
            pending = self._pending
            if closing:
                end = pending.find(self._content_end)
                if end >= 0:
                    self._pending = pending[self._without_closer(pending, end, 0) :]
                    closing = False
                    continue
            if self._eof:
                self._send("content", pending, final=True)
                self._pending = ""
                return
            keep = _settled(pending, (self._content_end,) if closing else ())
            self._send("content", pending[:keep])
            self._hold(pending[keep:])
            self._run = run
            yield
            self._run = None

    def _read_content_and_calls(self, called=False):
        """Content up to the tool calls, the calls, then what follows them: text,
        and more calls (``called``: calls ended the reasoning, the text follows
        them)."""
        # The opening marker stays pending until sent: a trigger may start with it.
        opener = 0
        if SECTION_BEFORE_CONTENT and not called:
            yield from self._open_section()
        if CONTENT_WRAPPED and not called:
            opener = yield from self._open_content()
        closing = bool(
            (opener or (self._content_opened and not called)) and self._content_end
        )
        search = 0  # the trigger is looked for from here on
        run = self._text_run("content", _CONTENT_STOPS)
        markers = _TRAILING_MARKERS
        if called:
            self._after = True
            run = self._text_run("content", _AFTER_STOPS)
            yield from self._after_calls(markers)
        while True:
            pending = self._pending
            if TRIGGER_ALSO:
                at = _seek(pending, search)
            else:
                at = pending.find(_SEEK, search)
            if closing:
                # The closer is dropped unless it may be part of a trigger.
                end = pending.find(self._content_end)
                if TRIGGER_ALSO:
                    limit = (
                        at if at >= 0 else min(_partial_at(pending, s) for s in _SEEKS)
                    )
                else:
                    limit = at if at >= 0 else _partial_at(pending, _SEEK)
                if end >= 0 and end + len(self._content_end) <= limit:
                    sent = self._without_closer(pending, end, opener)
                    self._pending = self._pending[sent:]
                    closing = False
                    # (triggers skipped before the closer stay skipped)
                    if search > end:
                        search = max(end, search - len(self._content_end))
                    search = max(0, search - sent)
                    if sent:
                        opener = 0
                    continue
            if at >= 0:
                # What is content whatever the calls turn out to be is sent first:
                # held with them, it would be copied again at every try of a run of
                # triggers that prove no calls. (Whitespace alone before the
                # trigger sends nothing: _content_kept keeps none of it.)
                before = pending[:at]
                keep = 0
                if at > opener and not before.isspace():
                    keep = self._content_kept(before, markers, closing)
                if keep > opener:
                    self._send("content", pending[opener:keep])
                    self._pending = pending[keep:]
                    at -= keep
                    opener = 0
                self._opener = opener
                search = yield from self._try_calls(at)
                if search >= 0:
                    opener = self._opener
                    continue
                # Calls were read: the text after them is content, and more calls.
                if not self._after:
                    self._after = True
                    run = self._text_run("content", _AFTER_STOPS)
                opener = search = 0
                closing = False
                yield from self._after_calls(markers)
                continue
            if self._eof:
                text = pending[opener:]
                if self._after:
                    text = _trim_end(text, markers)
                self._send("content", text, final=True)
                self._pending = ""
                return
            keep = self._content_kept(pending, markers, closing)
            if keep >= opener:
                self._send("content", pending[opener:keep])
                self._hold(pending[keep:])
                search = _search_from(search - keep, self._pending)
                opener = 0
            self._run = None if opener or search or self._gap is not None else run
            yield
            self._run = None

    def _without_closer(self, pending, end, opener):
        """Take the content's closer at ``end`` out of ``pending`` (``_pending``), and
        say how much of its start was sent: where the content before the closer ends
        in an end-of-turn marker, that content (less ``opener``) is sent now. The
        marker is text, since the closer follows it, and finish() would strip it as
        the output's last were it left at the end of the pending text."""
        before = pending[:end]
        self._pending = before + pending[end + len(self._content_end) :]
        if not _final_stop_apart(before)[1]:
            return 0
        kept = before.rstrip()
        self._send("content", kept[opener:])
        return len(kept)

    def _content_kept(self, pending, markers, closing):
        """How much of ``pending`` (content, or text after calls) can be sent: all
        but a tail that may still turn out to be a trigger or a marker, or that
        calls after it would drop (an end-of-turn marker, a turn break)."""
        watch = _SEEKS if TRIGGER_ALSO else (_SEEK,)
        if self._after:
            # End-of-turn markers that end the text after calls are dropped.
            keep = _settled(pending, watch + tuple(markers))
            # (the tail held may also end a marker that ends the text: _settled)
            kept = _trim_end(pending[:keep], markers)
            return min(len(kept), len(_trim_end(pending, markers)))
        keep = _settled(pending, watch + ((self._content_end,) if closing else ()))
        if TURN_BREAK and watch:
            # a turn break at the end: calls may follow it in a new turn
            keep = _short_of_break(pending, keep)
        return keep

    def _read_calls_or_content(self):
        """Nothing marks a call here: the output is calls or it is content."""
        self._held = ""
        if CONTENT_AS_UNIT:
            # As parse reads it: calls where the output starts (the content's
            # marker is no call's), else content and maybe calls after it.
            if not (yield from self._calls_to_the_end()):
                yield from self._read_unit_content()
            return
        opener = (yield from self._open_content()) if CONTENT_WRAPPED else 0
        self._pending = self._pending[opener:]
        closing = bool((opener or self._content_opened) and self._content_end)
        if not (yield from self._calls_to_the_end()):
            yield from self._read_plain(closing)

    def _calls_to_the_end(self):
        """Read calls from here on that run to the end of the output (nothing but
        end-of-turn markers after them): True once they are read and sent; else
        False, with nothing sent and the text pending again. While they may still
        be calls, what is read is held back (``_held``, the content before them,
        too)."""
        self._raw = []
        self._hold_from = len(self._deltas)
        try:
            yield from self._read_calls()
            # Calls only if nothing but end-of-turn markers follows them.
            markers = _TRAILING_MARKERS
            while not self._eof:
                rest = _trailing(self._pending)
                if rest and not _undecided(rest, markers):
                    raise _Broken
                yield
            if _trailing(self._pending):
                raise _Broken
        except _Broken:
            # Nothing held back was sent: no call is abandoned, no index used.
            del self._deltas[self._hold_from :]
            self._hold_from = None
            self._next_index, self._opened, self._completing = 0, [], {}
            self._ids, self._id_of = set(), {}
            self.abandoned = []
            self._replay("".join(self._raw) + self._pending)
            return False
        # The calls are sent, their pieces joined (held, they were kept apart).
        self._deltas[self._hold_from :] = _joined(self._deltas[self._hold_from :])
        self._hold_from = None
        self._pending = ""
        return True

    def _read_unit_content(self):
        """Content that is one unit of the turn (CONTENT_AS_UNIT): where it opens
        with its marker, a call separator in it may start calls that run to the
        end of the output; one that starts none is content (parse's
        ``_calls_after_content``)."""
        opener = yield from self._open_content()
        self._pending = self._pending[opener:]
        if not opener:
            yield from self._read_plain(False)
            return
        run = self._text_run("content", _UNIT_STOPS)
        attempts = 0
        search = 0  # the separator is looked for from here on
        while True:
            pending = self._pending
            at = pending.find(_SEPARATOR_SEEK, search) if attempts < _UNIT_TRIES else -1
            if at >= 0:
                attempts += 1
                start = len(pending[:at].rstrip())
                before = pending[:start]
                started = set(self._started)
                # The content before the separator is sent with the calls (held
                # back with them), as final.
                self._held = before
                self._pending = pending[start:]
                self._opener = 0
                if (yield from self._separator_then_calls()):
                    return
                # Not calls: nothing was sent; the text is content again.
                self._started = started
                self._held = self._held_stop = ""
                self._replay(before + self._pending)
                search = at + len(_SEPARATOR_SEEK)
                continue
            if self._eof:
                self._send("content", pending, final=True)
                self._pending = ""
                return
            watch = (_SEPARATOR_SEEK,) if attempts < _UNIT_TRIES else ()
            keep = _settled(pending, watch)
            self._send("content", pending[:keep])
            self._hold(pending[keep:])
            search = max(0, search - keep)
            self._run = None if search else run
            yield
            self._run = None

    def _separator_then_calls(self):
        """The call separator, then calls that run to the end of the output: True
        once they are read and sent; else False, with nothing sent and the text read
        pending again."""
        self._raw = []
        if not (yield from self._literal(CALL_SEPARATOR)):
            self._pending = "".join(self._raw) + self._pending
            return False
        separator = "".join(self._raw)
        read = yield from self._calls_to_the_end()
        if not read:
            self._pending = separator + self._pending
        return read

    def _after_calls(self, markers):
        """The start of the text after calls: whitespace and end-of-turn
        ``markers`` are dropped. The whitespace it starts with, after that before
        the calls, joins it to the content before them."""
        gap = self._before
        lead = True  # (only whitespace so far)
        while True:
            # Whitespace after the calls is dropped (so a run of it is not re-read).
            pending = self._pending
            self._pending = head = pending.lstrip()
            if lead:
                gap += pending[: len(pending) - len(head)]
                lead = not head
            for marker in markers:
                if head.startswith(marker):
                    self._pending = head[len(marker) :]
                    break
            else:
                if self._eof or (head and not _undecided(head, markers)):
                    break
                yield
        self._gap = gap

    def _try_calls(self, at):
        """Read the calls that the trigger at ``at`` starts: -1 once they are read,
        else where to look for the next trigger (the text is content again)."""
        pending = self._pending
        start = len(pending[:at].rstrip())
        # The content before the calls is sent once they prove well-formed.
        self._held = pending[:start]
        self._pending = pending[start:]
        self._raw = []
        try:
            yield from self._read_calls()
        except _Broken:
            self._abandon()
            held = self._held + self._held_stop
            self._held = self._held_stop = ""
            self._replay(held + "".join(self._raw) + self._pending)
            # The triggers inside the broken calls' text are skipped as parse skips
            # them: by what the text read since they began proves (all of it has).
            read = self._pending[len(held) :]
            return len(held) + _next_try(read, 0, at - start, self._types, _past_broken)
        self._commit()
        self._before = pending[start:at]  # the whitespace before the calls
        self._raw = []  # the calls are read: nothing of them is replayed
        return -1

    def _commit(self):
        """A call is being sent: the content before it is final."""
        if self._held:
            text = self._held[self._opener :]
            if self._after:
                # text after calls before more calls: less the markers it ends with
                kept = _trim_end(text, _TRAILING_MARKERS)
            else:
                kept = _strip_stop(_before_break(text) if TURN_BREAK else text).rstrip()
            self._held_stop = text[len(kept) :] if kept != text.rstrip() else ""
            self._send("content", kept, final=True)
        self._held = ""
        self._opener = 0

    def _replay(self, text):
        """Text read for calls that were not calls is pending again. At the end of
        the output it loses the end-of-turn marker that finish() could not see
        because the reader had taken it (parse strips it from the whole text)."""
        self._pending = self._unstopped(text)

    def _unstopped(self, text):
        """``text``, the rest of the output once the reader has read all it
        holds, less the final end-of-turn marker where finish() could not see it
        (the reader had taken it) and the output has ended."""
        if self._eof and not self._stop_cut:
            self._stop_cut = True
            return _strip_stop(text)
        return text

    def _consume(self, size):
        self._raw.append(self._pending[:size])
        self._pending = self._pending[size:]

    def _rejoined(self, held):
        """The pending text with the pieces of it ``held`` aside (emptied) put back
        in front (``_unstopped``)."""
        text = "".join(held) + self._pending
        held.clear()
        return self._unstopped(text)

    def _rewind(self, mark):
        """Put what was read since ``mark`` back in front of the pending text
        (``_unstopped``)."""
        self._pending = self._unstopped("".join(self._raw[mark:]) + self._pending)
        del self._raw[mark:]

    def _decide(self, literal):
        """Wait until more text cannot change what ``_match`` says of ``literal``.
        Whitespace that arrives meanwhile (it only delays the answer) waits aside
        until other text follows it, so that a long run of it is read once. Where
        it has matched ``literal`` meanwhile, what ``_match`` says (else None)."""
        space: list = []
        while not self._eof:
            if space and not self._pending.isspace():
                self._pending = "".join(space) + self._pending
                space = []
            pending = self._pending
            if (
                not space
                # (a part of the literal, most often while it arrives: undecided,
                # as _decided says, without its call)
                and (len(pending) >= len(literal) or not literal.startswith(pending))
                and _decided(pending, literal)
            ):
                end = _match(pending, 0, literal)
                if end < 0 or _apart(literal) or _before_stop(pending) >= end:
                    return end
                # The literal is written, but its end may still turn out to begin
                # the output's final end-of-turn marker, which parse strips first.
            if pending.isspace() or len(pending) - len(pending.rstrip()) > len(literal):
                # Only whitespace, or whitespace longer than the literal between
                # its markers: more of it cannot decide anything.
                space.append(pending)
                self._pending = ""
            yield
        self._pending = "".join(space) + self._pending
        return None

    def _peek(self, literal):
        """Whether ``literal`` comes next (as ``_match`` reads it)."""
        end = yield from self._decide(literal)
        if end is None:
            end = _match(self._pending, 0, literal)
        return end >= 0

    def _literal(self, literal):
        """Read ``literal``: False, with nothing read, when it is not next."""
        end = yield from self._decide(literal)
        if end is None:
            end = _match(self._pending, 0, literal)
        if end < 0:
            return False
        self._consume(end)
        return True

    def _call_start(self):
        """Read the call's opener: the template's, else the first of the others real
        outputs write (CALL_STARTS) that is next; False, with nothing read, when
        none is."""
        return (yield from self._one_of(CALL_STARTS or (CALL_START,)))

    def _one_of(self, literals):
        """Read the first of ``literals`` that is next (as ``_match`` reads each);
        False, with nothing read, when none is."""
        for literal in literals:
            yield from self._decide(literal)
        for literal in literals:
            end = _match(self._pending, 0, literal)
            if end >= 0:
                self._consume(end)
                return True
        return False

    def _closer(self, literal, also=(), others=()):
        """Read a closing ``literal`` (or one of ``also``, other spellings real
        outputs use, the first written, as ``_close_any`` reads them); the end of
        the output closes too, and so does its end inside the closer (``others``:
        what else may follow, as ``_close`` takes them)."""
        closers = (literal,) + also
        while True:
            for each in closers:
                yield from self._decide(each)
            for each in closers:
                end = _match(self._pending, 0, each)
                if end >= 0:
                    self._consume(end)
                    return
            if self._eof:
                break
            # What may yet be the closer cut short, or just the final end-of-turn
            # marker, waits: that marker, once whole, is kept apart (feed), and what
            # is left may be the closer's beginning again.
            pending = self._pending
            if not (_maybe_stop(pending) or _maybe_cut(pending, closers, others)):
                raise _Broken
            if pending.isspace():
                self._consume(len(pending))  # read now, not re-read
            yield
        if self._pending.strip() and not any(
            _cut_short(self._pending, 0, each, others) for each in closers
        ):
            raise _Broken
        self._consume(len(self._pending))

    def _skip_space(self):
        while True:
            stripped = self._pending.lstrip()
            self._consume(len(self._pending) - len(stripped))
            if stripped or self._eof:
                return
            yield

    def _name_upto(self, core):
        """A name written up to ``core``, as ``_read_name_to`` reads one (one word,
        whitespace around it), read up to where ``core`` starts; None as soon as the
        text before ``core`` can no longer be one word of a name's length, or the
        output ends without it. The whitespace after the word is read as it comes:
        however long a run of it, it is not held pending."""
        pending = self._pending
        if not pending or pending[0].isspace():  # (else _skip_space reads nothing)
            yield from self._skip_space()
        while True:
            pending = self._pending
            found = pending.find(core)
            sure = found if found >= 0 else _partial_at(pending, core)
            space = _FIRST_SPACE(pending, 0, sure)
            if space is not None:
                break
            if found >= 0:
                self._consume(found)
                return pending[:found]
            if self._eof or sure > _LONGEST_NAME:
                return None
            yield
        word = pending[: space.start()]
        self._consume(len(word))
        while True:  # only whitespace may come between the word and ``core``
            yield from self._skip_space()
            pending = self._pending
            if pending.startswith(core):
                return word
            if self._eof or not core.startswith(pending):
                return None
            yield

    def _until(self, core):
        """The text up to the next ``core``, read as it arrives (only a tail that
        may start ``core`` stays pending); None when the output ends first."""
        pieces = []
        while True:
            end = self._pending.find(core)
            if end >= 0 or self._eof:
                break
            keep = _partial_at(self._pending, core)
            pieces.append(self._pending[:keep])
            self._consume(keep)
            yield
        if end < 0:
            return None
        pieces.append(self._pending[:end])
        self._consume(end)
        return "".join(pieces)

    def _name_ended(self, after, options):
        """A name (or id) ended by ``after`` or one of ``options``, as ``_name_end``
        reads it: (the name, the parts skipped). It waits until more text cannot
        change the answer: a literal found, with room for the longest after where
        the name ends (a literal written later ends it later); else room for the
        longest past as far as ``_name_end`` looks: past a word longer than a name,
        or past the word and the whitespace after it (read as it comes, so that a
        long run of it is not held pending; put back once, when it is decided)."""
        yield from self._skip_space()
        literals = [literal for literal, _ in ((after, 0),) + options]
        longest = max([1] + [len(literal) for literal in literals])
        # (no literal can be found before one's first character is: "" for a
        # literal that ends the name at its word's end)
        cues = {literal.strip()[:1] for literal in literals}
        mark = len(self._raw)
        while not self._eof:
            pending = self._pending
            if len(self._raw) > mark:
                # the word is read: whitespace, then where a literal may start
                self._consume(len(pending) - len(pending.lstrip()))
                if len(self._pending) >= longest:
                    break
            else:
                if "" in cues or any(cue in pending for cue in cues):
                    found = _name_end(pending, 0, after, options)
                    if found is not None and found[0] + longest <= len(pending):
                        break
                space = _FIRST_SPACE(pending, 0, _LONGEST_NAME + 2)
                if space is not None:
                    self._consume(space.start())  # the word
                    continue
                if len(pending) > _LONGEST_NAME + 1 + longest:
                    break
            yield
        self._rewind(mark)
        pending = self._pending
        found = _name_end(pending, 0, after, options)
        if found is None:
            raise _Broken
        name = pending[: found[0]].strip()
        if not _good_name(name):
            raise _Broken
        self._consume(found[1])
        return name, found[2]

    def _name_before(self, literal):
        """A name (or id) written up to ``literal``."""
        name = yield from self._name_upto(_name_head(literal).strip())
        if name is None or not _good_name(name):
            raise _Broken
        if not (yield from self._literal(literal)):
            raise _Broken  # its first marker, not the rest (_read_name_to)
        return name

    def _open_call(self, index, name, call_id):
        self._commit()
        self._next_index = index + 1
        self._opened.append(index)
        if call_id in self._ids:
            call_id = None  # an earlier call keeps it
        elif call_id is not None:
            self._ids.add(call_id)
            self._id_of[index] = call_id
        self._deltas.append(
            {
                "tool_calls": [
                    {
                        "index": index,
                        "id": call_id,
                        "type": "function",
                        "function": {"name": name, "arguments": ""},
                    }
                ]
            }
        )

    def _arguments_text(self, index, text):
        if not text:
            return
        # A delta held back (maybe) over many chunks is not grown piece by piece:
        # that would copy it with every chunk.
        if (
            self._hold_from is None
            and self._deltas
            and "tool_calls" in self._deltas[-1]
        ):
            (call,) = self._deltas[-1]["tool_calls"]
            if call["index"] == index:
                call["function"]["arguments"] += text
                return
        self._deltas.append(
            {"tool_calls": [{"index": index, "function": {"arguments": text}}]}
        )

    def _complete(self, index, text, whole=False):
        """Send ``text``, which ends call ``index``'s arguments (all of them, if
        ``whole``), less its last character: that one waits until the call is
        confirmed, so that the arguments of a call abandoned meanwhile never read
        as JSON. (Where the arguments would read as JSON without it, all wait.)"""
        cut = len(text) - 1
        if whole and _is_json(text[:cut]):
            cut = 0
        self._arguments_text(index, text[:cut])
        self._completing[index] = text[cut:]

    def _confirm(self):
        """The calls sent since the last confirmed one are calls: complete them."""
        self._held_stop = ""
        for index in self._opened:
            self._arguments_text(index, self._completing.pop(index, ""))
        self._opened = []

    def _abandon(self, start=0):
        """The calls sent since the ``start``-th unconfirmed one are not calls."""
        for index in self._opened[start:]:
            self._completing.pop(index, None)
            self._ids.discard(self._id_of.pop(index, None))
            self.abandoned.append(index)
        del self._opened[start:]

    def _read_calls(self):
        """The calls from here on; raises _Broken when the first is not
        well-formed."""
        if CALL_PREFIXES:
            for prefix in CALL_PREFIXES:
                if (yield from self._literal(prefix)):
                    break
        if SECTION_START and not (
            yield from self._one_of(SECTION_STARTS or (SECTION_START,))
        ):
            raise _Broken
        count = 0
        while True:
            mark = len(self._raw)
            opened = len(self._opened)
            try:
                if count and not (yield from self._literal(CALL_SEPARATOR)):
                    break
                if not JSON_CALLS:
                    yield from self._read_tagged_call(self._next_index)
                elif LITERAL == "json":
                    yield from self._read_object_call(self._next_index)
                else:
                    yield from self._read_whole_object_call(self._next_index)
            except _Broken:
                if not count:
                    raise
                # Not another call: what was read belongs to the text after them.
                self._abandon(opened)
                self._rewind(mark)
                break
            count += 1
            if not SECTION_END:
                self._confirm()  # nothing after it can undo this call
        if SECTION_END:
            mark = len(self._raw)
            try:
                yield from self._closer(SECTION_END, others=_after_calls())
            except _Broken:
                # Not closed: the calls read stand, what follows is text after them.
                self._rewind(mark)
                self._confirm()
                return
            self._confirm()
        for marker in END_AFTER_CALLS:
            if (yield from self._literal(marker)):
                break

    def _next_char(self):
        """The next character once it has arrived ("" at the end of the output)."""
        while not self._pending and not self._eof:
            yield
        return self._pending[:1]

    def _json_space(self):
        """Skip the whitespace JSON allows between tokens."""
        while True:
            self._consume(_JSON_SPACE.match(self._pending).end())  # type: ignore[union-attr]
            if self._pending or self._eof:
                return
            yield

    def _json_value(self, index=None):
        """A JSON value's text, read to its end; with an ``index``, sent as that
        call's arguments as it arrives."""
        scan = _ValueEnd()
        raw, start = self._raw, len(self._raw)  # the value's text: raw[start:]
        loose = 0  # pieces the run kept since it last joined them

        def take(chunk):
            nonlocal loose
            if self._pending:
                return None
            if scan.quote and scan.quote not in chunk:
                # Inside a string that the chunk cannot close, the value goes on;
                # all that matters is whether the chunk ends inside an escape: after
                # a run of backslashes of odd length (the one escaped aside).
                if "\\" in chunk or (scan.escaped and chunk):
                    body = chunk[1:] if scan.escaped else chunk
                    scan.escaped = (len(body) - len(body.rstrip("\\"))) % 2 == 1
                scan.read += len(chunk)
            elif scan.attempt(chunk) is not None:
                # The value ends in the chunk: the reader reads it afresh, from
                # where the scanner was before it.
                return None
            raw.append(chunk)
            loose += 1
            if loose == _BLOCK:
                # A long value is not held as as many small strings as chunks.
                raw[-_BLOCK:] = ["".join(raw[-_BLOCK:])]
                loose = 0
            if index is None:
                return []
            return [
                {"tool_calls": [{"index": index, "function": {"arguments": chunk}}]}
            ]

        while True:
            end = scan.scan(self._pending, 0, self._eof)
            if end is not None and end < 0:
                raise _Broken
            piece = self._pending if end is None else self._pending[:end]
            self._consume(len(piece))
            if index is not None and end is not None:
                self._complete(index, piece)  # the value is the call's arguments
            elif index is not None:
                self._arguments_text(index, piece)
            if end is not None:
                return "".join(raw[start:])
            self._run = take
            yield
            self._run = None

    def _read_whole_object_call(self, index):
        """One call: an object, sent once it is whole."""
        if CALL_STARTS:
            if not (yield from self._call_start()):
                raise _Broken
        elif not (yield from self._literal(CALL_START)):
            raise _Broken
        yield from self._skip_space()
        if (yield from self._next_char()) != "{":
            raise _Broken
        text = yield from self._json_value()
        found = _read_call(CALL_START + text, 0, self._types)
        if found is None or found[1] < 0:
            raise _Broken
        call = found[0]
        self._open_call(index, call["function"]["name"], call["id"])
        self._complete(index, call["function"]["arguments"], whole=True)
        yield from self._closer(CALL_END)

    def _read_object_call(self, index):
        """One call: a JSON object, read member by member. Once the name (and id)
        are known, arguments written as an object stream as the model writes them;
        a call written in another order is sent when its object closes. Either way
        the whole object is then read as ``parse`` reads it."""
        if CALL_STARTS:
            if not (yield from self._call_start()):
                raise _Broken
        elif not (yield from self._literal(CALL_START)):
            raise _Broken
        yield from self._skip_space()
        mark = len(self._raw)
        if (yield from self._next_char()) != "{":
            raise _Broken
        self._consume(1)
        yield from self._json_space()
        members: set = set()
        name = call_id = None
        opened = False
        while (yield from self._next_char()) != "}":
            if members:
                if (yield from self._next_char()) != ",":
                    raise _Broken
                self._consume(1)
                yield from self._json_space()
            if (yield from self._next_char()) != '"':
                raise _Broken
            key = _decoded((yield from self._json_value()))
            if KEY_ALSO:
                key = KEY_ALSO.get(key, key)
            if key in members:
                raise _Broken
            if (
                FLAT_FIELDS
                and CALL_MEMBERS
                and not NAME_IS_KEY
                and (key,) not in CALL_MEMBERS
            ):
                raise _Broken  # a member the template never writes
            yield from self._json_space()
            if (yield from self._next_char()) != ":":
                raise _Broken
            self._consume(1)
            yield from self._json_space()
            # Whether the arguments begin here, with what the call needs known.
            if NAME_IS_KEY:
                name = key
                early = not members and _good_name(key)
            elif FLAT_FIELDS:
                early = (
                    key == ARGUMENTS_PATH[0]
                    and isinstance(name, str)
                    and _good_name(name)
                    and (not ID_PATH or ID_PATH[0] in members)
                )
            else:
                early = False
            early = early and (yield from self._next_char()) == "{"
            if early:
                self._open_call(index, name, call_id)
                opened = True
            if NAME_IS_KEY:
                yield from self._json_value(index if early else None)
            else:
                text = yield from self._json_value(index if early else None)
                if key == NAME_PATH[0]:
                    name = _decoded(text)
                elif ID_PATH and key == ID_PATH[0]:
                    call_id = _decoded(text)
                    call_id = call_id if isinstance(call_id, str) else None
            members.add(key)
            yield from self._json_space()
        self._consume(1)
        found = _read_call(CALL_START + "".join(self._raw[mark:]), 0, self._types)
        if found is None or found[1] < 0:
            raise _Broken
        call = found[0]
        if not opened:
            self._open_call(index, call["function"]["name"], call["id"])
            self._complete(index, call["function"]["arguments"], whole=True)
        yield from self._closer(CALL_END)

    def _read_tagged_call(self, index):
        """One call, its holes read in the order the format writes them."""
        if CALL_STARTS:
            if not (yield from self._call_start()):
                raise _Broken
        elif not (yield from self._literal(CALL_START)):
            raise _Broken
        name = call_id = None
        if OPTIONAL_PARTS:
            skip = False
        for hole, after, options in CALL_PARTS:
            if OPTIONAL_PARTS and skip:
                skip = False  # a hole the model left out, with the literal before it
            elif hole == "arguments":
                self._open_call(index, name, call_id)
                others: tuple = ()
                if JSON_ARGUMENTS:
                    yield from self._json_arguments(index)
                else:
                    count = yield from self._tagged_arguments(index, name, after)
                    others = _after_units(count)
                if options:
                    yield from self._closer(after, tuple(t for t, _ in options), others)
                else:
                    yield from self._closer(after, others=others)
            elif hole == "index":
                yield from self._index(after)
            else:
                if options:
                    # real outputs end it in other ways too (overrides)
                    word, skipped = yield from self._name_ended(after, options)
                    if OPTIONAL_PARTS:
                        skip = skipped > 0
                elif after.strip():
                    word = yield from self._name_before(after)
                else:
                    word = yield from self._word()
                if NAME_ESCAPES and hole == "name":
                    word = _unescaped(word, NAME_ESCAPES)  # as the tools name it
                # A hole the format writes twice holds the same word both times.
                if hole == "name":
                    if name is not None and word != name:
                        raise _Broken
                    name = word
                else:
                    if call_id is not None and word != call_id:
                        raise _Broken
                    call_id = word

    def _word(self):
        """A name written with nothing after it but the next marker."""
        yield from self._skip_space()
        while True:
            text = self._pending
            end = 0
            while end < len(text) and (text[end].isalnum() or text[end] in "_-.:"):
                end += 1
            if end < len(text) or self._eof or end > _LONGEST_NAME:
                break
            yield
        if not _good_name(text[:end]):
            raise _Broken
        self._consume(end)
        return text[:end]

    def _index(self, literal):
        """A call's index (0, 1, ...): read, not kept (its digits as they come:
        ``parse`` reads any number of them)."""
        yield from self._skip_space()
        digits = 0
        while True:
            text = self._pending
            end = 0
            while end < len(text) and text[end].isdigit():
                end += 1
            digits += end
            self._consume(end)
            if end < len(text) or self._eof:
                break
            yield
        if not digits:
            raise _Broken
        if not (yield from self._literal(literal)):
            raise _Broken

    def _json_arguments(self, index):
        """The arguments: one object, sent as it is read where the format writes
        JSON."""
        yield from self._skip_space()
        if (yield from self._next_char()) != "{":
            raise _Broken
        text = yield from self._json_value(index if LITERAL == "json" else None)
        try:
            value = _load(text, LITERAL)
        except ValueError:
            raise _Broken from None
        if not isinstance(value, dict):
            raise _Broken
        if LITERAL != "json":
            self._complete(index, json.dumps(value, ensure_ascii=False), whole=True)

    def _tagged_arguments(self, index, name, stop):
        """Key/value units up to ``stop`` or the first text that does not start
        one, sent as JSON as they are read."""
        types = self._types.get(name, {})
        count = 0
        keys = set()
        while True:
            mark = len(self._raw)
            if stop.strip() and (yield from self._peek(stop)):
                break
            left = False  # the separator left out
            if (
                count
                and ARG_SEPARATOR
                and not (yield from self._literal(ARG_SEPARATOR))
            ):
                left = _left_out((yield from self._next_char()), 0)
                if not left:
                    break
            if not (yield from self._literal(ARG_KEY_PREFIX)):
                self._rewind(mark)
                break
            key = yield from self._key()
            if key is None or (left and _word_end(key, 0) != len(key)):
                self._rewind(mark)
                break
            written = key
            if KEY_ESCAPES:
                key = _unescaped(key, KEY_ESCAPES)  # the key as the tools name it
            if key in keys:
                raise _Broken  # a key given twice: the call is not well-formed
            keys.add(key)
            kind = types.get(key)
            if ARG_VALUE_START:
                # the key's closing text names the value's type; skip to the value
                attribute = yield from self._until(ARG_VALUE_START.strip())
                if attribute is None:
                    raise _Broken
                kind = _attributed(attribute, kind)
                yield from self._literal(ARG_VALUE_START)
            opening = "{" if not count else ", "
            self._arguments_text(index, opening + _ENCODE_STRING(key) + ": ")
            if VERBATIM_OPEN or ELEMENTS:
                if VALUE_SUFFIX_NAMES_KEY:
                    suffix = ARG_VALUE_SUFFIX.replace("{key}", written)
                else:
                    suffix = ARG_VALUE_SUFFIX
                if (yield from self._marked_value(index, suffix, kind)):
                    count += 1
                    continue
            if not SUFFIXED_VALUES:
                yield from self._literal_value(index, kind, stop)
            elif VALUE_SUFFIX_NAMES_KEY:
                suffix = ARG_VALUE_SUFFIX.replace(
                    "{key}", written
                )  # the closer repeats the key
                yield from self._suffixed_value(index, suffix, kind, _KEY_MARK)
            else:
                yield from self._suffixed_value(
                    index, ARG_VALUE_SUFFIX, kind, _KEY_MARK
                )
            count += 1
        self._complete(index, "}" if count else "{}")
        return count

    def _key(self):
        """An argument's name, written up to its closing text; None if it is not
        one."""
        key = yield from self._name_upto(_name_head(ARG_KEY_END).strip())
        if key is None or not _good_name(key):
            return None
        if not (yield from self._literal(ARG_KEY_END)):
            return None  # its first marker, not the rest (_read_name_to)
        return key

    def _suffixed_value(self, index, suffix, kind, mark=""):
        """A value written up to ``suffix``, or up to a ``mark`` before it (the
        next unit's key: the suffix is missing): a string is sent as it arrives,
        any other value once it is whole."""
        core = suffix.strip()
        lead = suffix[: len(suffix) - len(suffix.lstrip())]
        # What may end the value: the suffix, less or with the whitespace it opens
        # with, or the mark.
        first, other = core[0], (lead + core)[0]
        cue = mark[:1] or first
        search, reach, tail = _value_tail(suffix, mark)
        streaming = kind == "string"
        if VALUE_ESCAPES:
            streaming = False  # a string whose escapes are decoded: sent once whole
        if streaming:
            self._arguments_text(index, '"')
        pieces = []

        raw, loose = self._raw, 0  # as in _json_value

        def take(chunk):
            """The deltas of the value read so far with ``chunk``: all of it but a
            tail that may start the suffix. None when the suffix is there."""
            nonlocal loose
            text = self._pending + chunk
            if first in text or other in text or cue in text:
                if core in text or (mark and mark in text):
                    return None
                if search is not None:  # (the format's own suffix: in C)
                    found = search(text, max(0, len(text) - reach))
                    keep = found.start() if found else len(text)
                else:
                    keep = tail(text)
                piece = text[:keep]
                self._pending = text[keep:]
            else:
                piece = text
                self._pending = ""
            raw.append(piece)
            loose += 1
            if loose == _BLOCK:
                # A long value is not held as as many small strings as chunks.
                raw[-_BLOCK:] = ["".join(raw[-_BLOCK:])]
                loose = 0
            if not streaming:
                pieces.append(piece)
                return []
            if not piece:
                return []
            if '"' in piece or "\\" in piece or not piece.isprintable():
                piece = _ENCODE_STRING(piece)[1:-1]  # as _json_text, without its call
            return [
                {"tool_calls": [{"index": index, "function": {"arguments": piece}}]}
            ]

        while True:
            pending = self._pending
            end = pending.find(core)
            cut = -1
            if mark:
                limit = len(_before(pending[:end], suffix)) if end >= 0 else None
                cut = _key_at(pending, 0, limit, mark)
            if end >= 0 or cut >= 0:
                break
            if self._eof:
                raise _Broken
            self._deltas += take("")
            self._run = take
            yield
            self._run = None
        if cut >= 0:
            last = pending[:cut]  # the next unit's key follows
            self._consume(cut)
        else:
            last = _before(pending[:end], suffix)
            self._consume(end)
            yield from self._literal(suffix)
        if streaming:
            self._arguments_text(index, _json_text(last) + '"')
        else:
            text = "".join(pieces) + last
            if VALUE_ESCAPES:
                text = _unescaped(text, VALUE_ESCAPES)
            value = _typed(text, kind, LITERAL)
            self._arguments_text(index, json.dumps(value, ensure_ascii=False))

    def _marked_value(self, index, suffix, kind):
        """A value written between the verbatim marks, or as elements, and then
        ``suffix``: True once it is read and sent; False, with nothing read, where
        the value is to be read as any other."""
        head = ""
        if ELEMENTS and kind != "string":
            head = _element_patterns()[2]
        marks = (VERBATIM_OPEN, head) if VERBATIM_OPEN else (head,)
        while not self._eof and _undecided(self._pending, marks):
            yield
        if VERBATIM_OPEN and self._pending.startswith(VERBATIM_OPEN):
            yield from self._verbatim_value(index, suffix, kind)
            return True
        if ELEMENTS and head and self._pending.startswith(head):
            return (yield from self._nested_value(index, suffix, kind))
        return False

    def _nested_value(self, index, suffix, kind):
        """Elements and then ``suffix``, sent once they are whole: True; False, with
        nothing read, where they spell no value (read again as any other value)."""
        mark = len(self._raw)
        scan = _ElementsEnd()
        pieces = []
        while True:
            end = scan.scan(self._pending, 0, self._eof)
            if end is not None and end < 0:
                self._rewind(mark)
                return False
            piece = self._pending[: scan.safe if end is None else end]
            pieces.append(piece)
            self._consume(len(piece))
            if end is not None:
                break
            yield
        if not (yield from self._literal(suffix)):
            self._rewind(mark)
            return False
        try:
            value = _elements_value("".join(pieces), kind)
        except ValueError:
            self._rewind(mark)
            return False
        self._arguments_text(index, json.dumps(value, ensure_ascii=False))
        return True

    def _verbatim_value(self, index, suffix, kind):
        """A string between the verbatim marks, up to the first closing mark that
        ``suffix`` follows, then the suffix: sent as it arrives (typed once whole
        where the schema says it is no string)."""
        self._consume(len(VERBATIM_OPEN))
        streaming = kind is None or kind == "string"
        if streaming:
            self._arguments_text(index, '"')
        pieces = []
        while True:
            end = self._pending.find(VERBATIM_CLOSE)
            if end < 0 and self._eof:
                raise _Broken
            keep = end if end >= 0 else _partial_at(self._pending, VERBATIM_CLOSE)
            piece = self._pending[:keep]
            self._consume(keep)
            if streaming:
                self._arguments_text(index, _json_text(piece))
            else:
                pieces.append(piece)
            if end < 0:
                yield
                continue
            self._consume(len(VERBATIM_CLOSE))
            if (yield from self._peek(suffix)):
                break
            # a closing mark the suffix does not follow: the string's own text
            if streaming:
                self._arguments_text(index, _json_text(VERBATIM_CLOSE))
            else:
                pieces.append(VERBATIM_CLOSE)
        yield from self._literal(suffix)
        if streaming:
            self._arguments_text(index, '"')
        else:
            value = _typed("".join(pieces), kind, LITERAL)
            self._arguments_text(index, json.dumps(value, ensure_ascii=False))

    def _string_to_end(self, stop):
        """A string written as it is, read to its closing quote as ``_string_end``
        finds it (each quote waits until what follows it decides): its text."""
        pieces = []
        first = None  # where the first closing quote was read to, and the text there
        while True:
            piece = yield from self._until(ARG_STRING_CLOSE)
            if piece is None:
                break
            pieces.append(piece)
            if first is None:
                first = len(self._raw), "".join(pieces)
            size = len(ARG_STRING_CLOSE)
            while True:
                follows = _follows_value(self._pending, size, stop, self._eof)
                if follows is not None:
                    break
                yield
            self._consume(size)
            if follows:
                return "".join(pieces)
            pieces.append(ARG_STRING_CLOSE)  # a quote inside the string
        if first is None:
            raise _Broken
        mark, text = first
        self._rewind(mark)  # no value's end follows any: the first quote ends it
        self._consume(len(ARG_STRING_CLOSE))
        return text

    def _quoted_to_end(self, text, stop):
        """A string between quotes whose first closing quote ends ``text``, read on
        to the closing quote that ``_quoted_end`` takes (each waits until what
        follows it decides): its whole text."""
        mark = len(self._raw)
        read = [text]
        while True:
            while True:
                follows = _follows_value(self._pending, 0, stop, self._eof)
                if follows is not None:
                    break
                yield
            if follows:
                return "".join(read)
            scan = _string_goes_on(text[0])
            while True:
                end = scan.scan(self._pending, 0, self._eof)
                if end is not None and end < 0:
                    self._rewind(mark)  # no later quote: the first ends it
                    return text
                piece = self._pending if end is None else self._pending[:end]
                read.append(piece)
                self._consume(len(piece))
                if end is not None:
                    break
                yield

    def _literal_value(self, index, kind, stop):
        """A value with nothing after it to mark its end: a quoted string, or a
        literal read to its end (in arguments that ``stop`` closes). Sent once it
        is whole."""
        if ARG_STRING_OPEN:
            while not self._eof and _undecided(self._pending, (ARG_STRING_OPEN,)):
                yield
        if (
            ARG_STRING_OPEN
            and not QUOTED_STRINGS
            and self._pending.startswith(ARG_STRING_OPEN)
        ):
            self._consume(len(ARG_STRING_OPEN))
            if RAW_STRINGS:
                yield from self._suffixed_value(index, ARG_STRING_CLOSE, "string")
                return
            inner = yield from self._string_to_end(stop)
            raw = ARG_STRING_OPEN + inner + ARG_STRING_CLOSE
            try:
                value = _load(raw, LITERAL)
            except ValueError:
                value = inner
        elif OWN_VALUES:
            # A value in the template's own syntax: read up to where a mark may
            # begin; the rest stays pending, to be read with the next piece.
            own = _OwnEnd()
            pieces = []
            while True:
                end = own.scan(self._pending, 0, self._eof)
                if end is not None and end < 0:
                    raise _Broken
                piece = self._pending[: own.safe if end is None else end]
                pieces.append(piece)
                self._consume(len(piece))
                if end is not None:
                    break
                yield
            try:
                value = _own_typed("".join(pieces), kind)
            except ValueError:
                raise _Broken from None
        else:
            scan = _ValueEnd()
            pieces = []
            while True:
                end = scan.scan(self._pending, 0, self._eof)
                if end is not None and end < 0:
                    raise _Broken
                piece = self._pending if end is None else self._pending[:end]
                pieces.append(piece)
                self._consume(len(piece))
                if end is not None:
                    break
                yield
            text = "".join(pieces)
            if QUOTED_STRINGS and text.startswith(ARG_STRING_OPEN):
                # a quoted string: its escapes were skipped to find its end, and a
                # quote that no value's end follows is its own (_quoted_end)
                text = yield from self._quoted_to_end(text, stop)
                try:
                    value = _load(text, LITERAL)
                except ValueError:
                    value = text[
                        len(ARG_STRING_OPEN) : len(text) - len(ARG_STRING_CLOSE)
                    ]
            elif text[:1] in ARG_STRING_QUOTES_ALSO:
                # a string between another of Python's quotes (as _quoted_end reads it)
                text = yield from self._quoted_to_end(text, stop)
                value = _python_string(text)
            else:
                value = _typed(text, kind, LITERAL)
        self._arguments_text(index, json.dumps(value, ensure_ascii=False))
