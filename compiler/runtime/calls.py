"""Reading a whole output's tool calls: the section, each call (one JSON object, or
text with holes in the order the format writes them), the arguments.

Every scan moves forward from where the last one stopped, so reading the calls of
a text costs time linear in its length.
"""

from __future__ import annotations

import json

from .format import (
    ARG_KEY_END,
    ARG_KEY_PREFIX,
    ARG_SEPARATOR,
    ARG_STRING_ATTRIBUTE,
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
    CONTENT_START,
    ELEMENTS,
    END_AFTER_CALLS,
    ID_PATH,
    JSON_ARGUMENTS,
    JSON_CALLS,
    KEY_ALSO,
    KEY_ESCAPES,
    LITERAL,
    NAME_ESCAPES,
    NAME_IS_KEY,
    NAME_PATH,
    OPTIONAL_PARTS,
    OWN_VALUES,
    QUOTED_STRINGS,
    RAW_STRINGS,
    SECTION_END,
    SECTION_START,
    SECTION_STARTS,
    SUFFIXED_VALUES,
    TRIGGER_ALSO,
    VALUE_ESCAPES,
    VALUE_SUFFIX_NAMES_KEY,
    VERBATIM_OPEN,
)
from .text import (
    _TURN_ENDS,
    _SEEK,
    _SEPARATOR_SEEK,
    _SPLIT,
    _close_any,
    _cut_short,
    _find,
    _good_name,
    _loose,
    _match,
    _match_start,
    _name_end,
    _past_start,
    _pieces,
    _read_name_to,
    _read_to,
    _seek,
    _skip_space,
    _split,
    _word_end,
)
from .values import (
    _element_patterns,
    _elements_value,
    _ElementsEnd,
    _unescaped,
    _verbatim_end,
    _field,
    _json_loads,
    _json_object,
    _load,
    _own_typed,
    _OwnEnd,
    _python_string,
    _read_members,
    _read_object,
    _typed,
    _value_end,
    _ValueEnd,
)


def _unique_ids(calls):
    """``calls`` (in the order written), a call whose id an earlier call has kept
    given none: a client keys results by id, and a server gives a call without one
    an id of its own. The stream decides as each call opens (``_open_call``)."""
    taken = set()
    for call in calls:
        if call["id"] in taken:
            call["id"] = None
        elif call["id"] is not None:
            taken.add(call["id"])
    return calls


def _call(name, arguments, call_id):
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }


def _close(text, at, literal, others=()):
    """The end of a call's closing ``literal``; a text that ends instead (the
    server cut the stop marker), or ends inside the literal (and not inside one of
    ``others``, what else may follow there: ``_cut_short``), closes it too."""
    if at < 0:
        return -1
    end = _match(text, at, literal)
    if end < 0 and _skip_space(text, at) == len(text):
        return len(text)
    if end < 0 and _cut_short(text, at, literal, others):
        return len(text)
    return end


def _after_units(count):
    """What may follow ``count`` key/value units besides the arguments' closer: the
    next unit's opening."""
    return (ARG_SEPARATOR + ARG_KEY_PREFIX,) if count else (ARG_KEY_PREFIX,)


def _after_calls():
    """What may follow a call besides the section's closer: the next call's opening
    (the separator, then the call's start, or another opener real outputs write)."""
    return tuple(CALL_SEPARATOR + start for start in CALL_STARTS or (CALL_START,))


def _read_calls(text, at, types):
    """The calls written from ``at`` on: (calls, end), or None."""
    if CALL_PREFIXES:
        at = _past_prefix(text, at)
    if SECTION_START:
        at = _past_section_start(text, at)
        if at < 0:
            return None
    calls: list = []
    while True:
        before = at
        if calls:
            if at == len(text):
                # Nothing is left, and no call can be read from nothing: one that
                # could would be read there again and again.
                break
            at = _match(text, at, CALL_SEPARATOR)
            if at < 0:
                at = before
                break
        found = _read_call(text, at, types) if at >= 0 else None
        if found is None or found[1] < 0:
            at = before
            break
        call, at = found
        calls.append(call)
    if not calls:
        return None
    if SECTION_END:
        end = _close(text, at, SECTION_END, _after_calls())
        if end < 0:
            # Not closed: the calls read stand, and what follows is text after them.
            return calls, at
        at = end
    for marker in END_AFTER_CALLS:
        end = _match(text, at, marker)
        if end >= 0:
            at = end
            break
    return calls, at


def _past_section_start(text, at):
    """The end of the section's opener written at ``at`` (the template's, else the
    first of the others real outputs write that is: "" where they leave it out),
    or -1."""
    for start in SECTION_STARTS or (SECTION_START,):
        end = _match(text, at, start)
        if end >= 0:
            return end
    return -1


def _past_prefix(text, at):
    """Past a marker real outputs write before the calls (CALL_PREFIXES), the first
    of them written at ``at``; else ``at``."""
    for prefix in CALL_PREFIXES:
        end = _match(text, at, prefix)
        if end >= 0:
            return end
    return at


def _as_written(members):
    """A call object's members with the other names real outputs give them
    (KEY_ALSO) as the template names them; None where two name one member."""
    renamed = {}
    for key, value in members.items():
        key = KEY_ALSO.get(key, key)
        if key in renamed:
            return None
        renamed[key] = value
    return renamed


def _member(members, path):
    """The value at ``path`` in an object read by ``_read_members``."""
    if path[0] not in members:
        return None
    return _field(members[path[0]][0], path[1:])


def _arguments_text(text, value, start, stop):
    """A call's arguments as JSON text: the model's own where it wrote an object
    (``text[start:stop]``), the string's content where it wrote a string holding
    JSON, else None."""
    if isinstance(value, dict):
        return text[start:stop]
    if isinstance(value, str):
        try:
            _json_loads(value)
        except (ValueError, RecursionError):
            return None
        return value
    return None


def _known_members(value, prefix=()):
    """Whether every member of a call object (or of an object on the way to its
    fields) is one the template writes: a member it never writes would be lost."""
    for key, item in value.items():
        path = prefix + (key,)
        if path in CALL_MEMBERS:
            continue
        if not isinstance(item, dict):
            return False
        if not any(known[: len(path)] == path for known in CALL_MEMBERS):
            return False
        if not _known_members(item, path):
            return False
    return True


def _checked_call(name, arguments, call_id, text, end):
    """(call, end) once a call's fields are read, or None when they make no call."""
    if not isinstance(name, str) or not _good_name(name):
        return None
    if arguments is None:
        return None
    if call_id is not None and not isinstance(call_id, str):
        call_id = None
    return _call(name, arguments, call_id), _close(text, end, CALL_END)


def _read_json_call(text, at, types):
    """One call written as a JSON object at ``at``, read member by member so that
    its arguments are the model's own text: (call, end) or None."""
    if CALL_STARTS:
        at = _match_start(text, at)
    else:
        at = _match(text, at, CALL_START)
    if at < 0:
        return None
    found = _read_members(text, at)
    if found is None:
        return None
    members, end = found
    if KEY_ALSO:
        members = _as_written(members)
        if members is None:
            return None
    if NAME_IS_KEY:
        if len(members) != 1:
            return None
        ((name, (value, start, stop)),) = members.items()
        arguments = _arguments_text(text, value, start, stop)
        call_id = None
    else:
        if CALL_MEMBERS:
            for key in members:
                if (key,) not in CALL_MEMBERS:
                    # a member beside those the template writes at the top, or on
                    # the way to a nested field (the common case never gets here)
                    fields = {key: value for key, (value, _, _) in members.items()}
                    if not _known_members(fields):
                        return None
                    break
        name = _member(members, NAME_PATH)
        call_id = _member(members, ID_PATH) if ID_PATH else None
        if len(ARGUMENTS_PATH) > 1:
            # Nested arguments have no span of their own here: they are re-encoded.
            value = _member(members, ARGUMENTS_PATH)
            arguments = _arguments_text(
                json.dumps(value, ensure_ascii=False), value, 0, None
            )
        else:
            value, start, stop = members.get(ARGUMENTS_PATH[0], (None, 0, 0))
            arguments = _arguments_text(text, value, start, stop)
    return _checked_call(name, arguments, call_id, text, end)


def _read_literal_call(text, at, types):
    """One call written as a Python-literal object at ``at``, decoded whole, its
    arguments re-encoded as JSON (the model did not write JSON): (call, end) or None."""
    if CALL_STARTS:
        at = _match_start(text, at)
    else:
        at = _match(text, at, CALL_START)
    if at < 0:
        return None
    found = _read_object(text, at)
    if found is None:
        return None
    value, _, end = found
    if KEY_ALSO and isinstance(value, dict):
        value = _as_written(value)
        if value is None:
            return None
    if NAME_IS_KEY:
        if len(value) != 1:
            return None
        ((name, arguments),) = value.items()
        call_id = None
    else:
        if CALL_MEMBERS and not _known_members(value):
            return None
        name = _field(value, NAME_PATH)
        arguments = _field(value, ARGUMENTS_PATH)
        call_id = _field(value, ID_PATH) if ID_PATH else None
    if isinstance(arguments, dict):
        arguments = _json_object(arguments)
    elif isinstance(arguments, str):
        try:
            _json_loads(arguments)
        except (ValueError, RecursionError):
            arguments = None
    else:
        arguments = None
    return _checked_call(name, arguments, call_id, text, end)


def _read_tagged_call(text, at, types):
    """One call at ``at``, its holes read in the order the format writes them:
    (call, end) or None. A hole written twice must hold the same word twice."""
    if CALL_STARTS:
        at = _match_start(text, at)
    else:
        at = _match(text, at, CALL_START)
    if at < 0:
        return None
    name = call_id = None
    arguments = "{}"
    if OPTIONAL_PARTS:
        skip = False
    for hole, after, options in CALL_PARTS:
        if OPTIONAL_PARTS and skip:
            skip = False  # a hole the model left out, with the literal before it
        elif hole == "arguments":
            if JSON_ARGUMENTS:
                found = _read_object(text, at)
                if found is None:
                    return None
                value, start, end = found
                if LITERAL == "json":
                    arguments = text[start:end]
                else:
                    arguments = _json_object(value)
                if options:
                    at = _close_any(text, end, (after,) + tuple(t for t, _ in options))
                else:
                    at = _close(text, end, after)
            else:
                read = _read_arguments(text, at, types.get(name, {}), after)
                if read is None:
                    return None
                values, at = read
                arguments = _json_object(values)
                at = _close(text, at, after, _after_units(len(values)))
            if at < 0:
                return None
        elif hole == "index":
            # the call's index (0, 1, ...): not kept
            at = _skip_space(text, at)
            start = at
            while at < len(text) and text[at].isdigit():
                at += 1
            if at == start:
                return None
            at = _match(text, at, after)
            if at < 0:
                return None
        else:
            # the function name, or the call's id
            at = _skip_space(text, at)
            if options:
                # real outputs end it in other ways too (overrides)
                found = _name_end(text, at, after, options)
                if found is None:
                    return None
                word = text[at : found[0]].strip()
                at = found[1]
                if OPTIONAL_PARTS:
                    skip = found[2] > 0
            elif after.strip():
                found = _read_name_to(text, at, after)
                if found is None:
                    return None
                word = text[at : found[0]].strip()
                at = found[1]
            else:
                end = _word_end(text, at)
                if end < 0:
                    return None
                word = text[at:end]
                at = end
            if not _good_name(word):
                return None
            if NAME_ESCAPES and hole == "name":
                word = _unescaped(word, NAME_ESCAPES)  # the name as the tools give it
            # A hole the format writes twice holds the same word both times.
            if hole == "name":
                if name is not None and word != name:
                    return None
                name = word
            else:
                if call_id is not None and word != call_id:
                    return None
                call_id = word
    return _call(name, arguments, call_id), at


def _read_arguments(text, at, types, stop):
    """Key/value units up to ``stop`` or the first text that does not start one:
    (values, end), or None when a unit starts but is broken."""
    values: dict = {}
    # Where ``stop`` is written (as _match finds it) the units end: its pattern is
    # looked up once, and tried at each unit in one C-level match.
    stops = _loose(stop) if stop.strip() else None
    while True:
        unit = at
        if stops and stops(text, at):
            return values, unit
        left = False  # the separator left out
        if ARG_SEPARATOR:  # (an empty one matches where it is)
            if values:
                at = _match(text, at, ARG_SEPARATOR)
                left = at < 0 and _left_out(text, unit)
                if left:
                    at = unit
                if at < 0:
                    return values, unit
        at = _match(text, at, ARG_KEY_PREFIX)
        if at < 0:
            return values, unit
        found = _read_name_to(text, at, ARG_KEY_END)
        key = text[at : found[0]].strip() if found else ""
        if not _good_name(key) or (left and _word_end(key, 0) != len(key)):
            return values, unit
        written = key
        if KEY_ESCAPES:
            key = _unescaped(key, KEY_ESCAPES)  # the key as the tools name it
        if key in values:
            return None  # a key given twice: the call is not well-formed
        at = found[1]
        kind = types.get(key)
        if ARG_VALUE_START:
            # the key's closing text names the value's type; skip to the value
            found = _read_to(text, at, ARG_VALUE_START)
            if found is None:
                return None
            kind = _attributed(text[at : found[0]], kind)
            at = found[1]
        if SUFFIXED_VALUES:
            if VALUE_SUFFIX_NAMES_KEY:
                suffix = ARG_VALUE_SUFFIX.replace(
                    "{key}", written
                )  # the closer repeats the key
            else:
                suffix = ARG_VALUE_SUFFIX
            if VERBATIM_OPEN and text.startswith(VERBATIM_OPEN, at):
                # a string between the verbatim marks, as it stands
                found = _verbatim_end(text, at + len(VERBATIM_OPEN), suffix)
                if found is None:
                    return None
                raw = text[at + len(VERBATIM_OPEN) : found[0]]
                values[key] = (
                    raw if kind in (None, "string") else _typed(raw, kind, LITERAL)
                )
                at = found[1]
                continue
            if ELEMENTS and kind != "string":
                if text.startswith(_element_patterns()[2], at):
                    read = _read_elements(text, at, suffix, kind)
                    if read is not None:
                        values[key], at = read
                        continue
            found = _suffixed_end(text, at, suffix)
            if found is None:
                return None
            raw = text[at : found[0]]
            at = found[1]
            if VALUE_ESCAPES:
                raw = _unescaped(raw, VALUE_ESCAPES)
            # (a string, the common case, is the text as written: no call for it)
            values[key] = raw if kind == "string" else _typed(raw, kind, LITERAL)
        elif ARG_STRING_OPEN and text.startswith(ARG_STRING_OPEN, at):
            if QUOTED_STRINGS:
                # a quote: the string's escapes are skipped to find its end
                end = _quoted_end(text, at, stop) - len(ARG_STRING_CLOSE)
            elif RAW_STRINGS:
                # marks of the template's own, which no string holds
                end = text.find(ARG_STRING_CLOSE, at + len(ARG_STRING_OPEN))
            else:
                end = _string_end(text, at + len(ARG_STRING_OPEN), stop)
            if end < 0:
                return None
            raw = text[at : end + len(ARG_STRING_CLOSE)]
            at = end + len(ARG_STRING_CLOSE)
            try:
                values[key] = _load(raw, LITERAL)
            except ValueError:
                values[key] = raw[
                    len(ARG_STRING_OPEN) : len(raw) - len(ARG_STRING_CLOSE)
                ]
        elif ARG_STRING_QUOTES_ALSO and text[at : at + 1] in ARG_STRING_QUOTES_ALSO:
            # a string between another of Python's quotes, read as Python reads one
            end = _quoted_end(text, at, stop)
            if end < 0:
                return None
            values[key] = _python_string(text[at:end])
            at = end
        elif OWN_VALUES:
            # a value in the template's own syntax
            end = _OwnEnd().scan(text, at)
            if end < 0:
                return None
            try:
                values[key] = _own_typed(text[at:end], kind)
            except ValueError:
                return None
            at = end
        else:
            end = _value_end(text, at)
            if end < 0:
                return None
            values[key] = _typed(text[at:end], kind, LITERAL)
            at = end
        if at < 0:
            return None


def _attributed(attribute, kind):
    """How a value is typed (``kind``: by the schema) once the text between its key
    and itself (an attribute naming its type) is read: a string where the model says
    so and the schema admits one or says nothing; where the schema admits no
    string, the schema's way (models mark numbers and objects as strings too)."""
    if not ARG_STRING_ATTRIBUTE or attribute.strip() != ARG_STRING_ATTRIBUTE:
        return kind
    return "string" if kind is None or "string" in kind else kind


# -- where a string written as it is ends ----------------------------------------
# A template that writes a string between quotes as it is (no escapes) writes a quote
# inside it as it is too: the string ends at the first closing quote that what the
# template writes after a value follows (the next unit's key, or the arguments'
# closer and then the next call, the section's closer or the end of the output);
# where none does, at the first. The look past a quote is bounded (names, and
# whitespace at one place), so the stream decides each quote after a few characters.

_SPACE_REACH = 64  # whitespace read at one place


def _string_end(text, at, stop):
    """Where a string written as it is, its text from ``at``, ends: the closing quote
    a value's end follows (``_follows_value``), else the first; -1 where none."""
    first = close = text.find(ARG_STRING_CLOSE, at)
    while close >= 0:
        if _follows_value(text, close + len(ARG_STRING_CLOSE), stop, True):
            return close
        close = text.find(ARG_STRING_CLOSE, close + 1)
    return first


def _quoted_end(text, at, stop):
    """The end of a string written at ``at`` between quotes, its escapes skipped: the
    first closing quote a value's end follows (a model may leave a quote inside it
    unescaped), else the first; -1 where it is not closed."""
    first = end = _value_end(text, at)
    while end >= 0:
        if _follows_value(text, end, stop, True):
            return end
        end = _string_goes_on(text[at]).scan(text, end)
    return first


def _string_goes_on(quote):
    """A scanner that reads on inside a string ``quote`` opened (to its next
    closing quote, escapes skipped)."""
    scan = _ValueEnd()
    scan.quote, scan.read = quote, 1
    return scan


def _follows_value(text, at, stop, final):
    """Whether what is written from ``at`` is what the template writes after a value
    of the arguments that ``stop`` closes: True, False, or None where the text ends
    before that is known (``final``: it has ended)."""
    unsure = False
    for steps in _FOLLOWERS.get(stop) or _followers(stop):
        found = _steps_at(text, at, steps, final)
        if found:
            return True
        unsure = unsure or found is None
    return None if unsure else False


def _followers(stop):
    """The ways text goes on after a value, each a list of steps (``_steps_at``): the
    separator and the next unit's key; the closer ``stop`` and then the section's
    closer, the next call's opening or the end of the output (the closer alone
    where the calls have no section: anything may follow it)."""
    unit = [
        ("literal", ARG_KEY_PREFIX),
        ("name", ARG_KEY_END),
        ("literal", ARG_KEY_END),
    ]
    ways = [[("literal", ARG_SEPARATOR)] + unit]
    if ARG_SEPARATOR.strip():
        # the separator left out (_left_out): then the key is a word
        word = [("space", ""), ("literal", ARG_KEY_PREFIX), ("word", ARG_KEY_END)]
        ways.append(word + unit[2:])
    if SECTION_END:
        nexts = [[("literal", SECTION_END)], [("end", "")]]
        for start in CALL_STARTS or (CALL_START,):
            opening = [("literal", CALL_SEPARATOR + start)]
            hole, after, _ = CALL_PARTS[0]
            if hole == "name" and after.strip():
                opening += [("name", after), ("literal", after)]
            nexts.append(opening)
        ways += [[("literal", stop)] + rest for rest in nexts]
    else:
        ways.append([("literal", stop)])
    if len(_FOLLOWERS) < 64:
        _FOLLOWERS[stop] = ways
    return ways


_FOLLOWERS: dict = {}


def _steps_at(text, at, steps, final):
    """Whether ``steps`` match from ``at``: True, False, or None where the text ends
    first (not ``final``). A step is a literal (its markers, whitespace before each,
    as much as ``_SPACE_REACH``), a name or a word up to the literal that ends it
    (``_name_step``), some whitespace, or the end of the output (whitespace aside)."""
    for kind, literal in steps:
        if kind == "end":
            if _space_end(text, at) < len(text):
                return False
            return True if final else None
        if kind == "space":
            if at == len(text):
                return False if final else None
            if not text[at].isspace():
                return False
            continue
        if kind == "literal":
            found = _literal_step(text, at, literal, final)
        else:
            found = _name_step(text, at, literal, kind == "word", final)
        if found is None or found is False:
            return found
        at = found
    return True


def _literal_step(text, at, literal, final):
    """The end of ``literal`` at ``at`` as ``_steps_at`` reads it; False, or None
    where the text ends in it (not ``final``)."""
    for piece in _pieces(literal)[0]:
        at = _space_end(text, at)
        if text.startswith(piece, at):
            at += len(piece)
        elif not final and piece.startswith(text[at : at + len(piece)]):
            return None
        else:
            return False
    return at


def _name_step(text, at, literal, word, final):
    """The end of a name written at ``at`` up to ``literal`` (at most 256 characters,
    no whitespace and no quote; a ``word``: letters, digits and ``_-.:`` only);
    False, or None where the text ends in it (not ``final``). A name holds no quote
    (a key or a function's name is a word the template writes bare), so what follows
    a value never takes in the string's closing quote: a quote inside a string is its
    end only by the text between it and the next quote, which the grammars can say
    (compiler/quoted_strings.py)."""
    at = _space_end(text, at)
    stop = (_pieces(literal)[0] or [" "])[0][0]
    start = at
    limit = min(len(text), at + 256)
    if word:
        while at < limit and text[at] != stop and _in_word(text[at]):
            at += 1
    while at < limit and text[at] != stop and not text[at].isspace():
        if word or text[at] in "'\"":
            return False  # what ends the word (or a quote) is not the key's end
        at += 1
    if at == len(text) and not final:
        return None  # the name may go on
    return False if at == start else at


def _in_word(char):
    """Whether ``char`` may be part of a word (as ``_word_end`` reads one)."""
    return char.isalnum() or char in "_-.:"


def _space_end(text, at):
    """Where the whitespace from ``at`` ends, read as far as ``_SPACE_REACH``."""
    limit = min(len(text), at + _SPACE_REACH)
    while at < limit and text[at].isspace():
        at += 1
    return at


def _left_out(text, at):
    """Whether the separator before the unit at ``at`` may have been left out: it is
    more than whitespace, and whitespace stands in its place (``a=1 b=2``); the unit
    must then follow, its key a word."""
    return bool(ARG_SEPARATOR.strip()) and text[at : at + 1].isspace()


def _read_elements(text, at, suffix, kind):
    """(the object or array that elements written at ``at`` spell, where the
    ``suffix`` after them ends), or None where they spell none."""
    end = _ElementsEnd().scan(text, at)
    if end < 0:
        return None
    after = _match(text, end, suffix)
    if after < 0:
        return None
    try:
        return _elements_value(text[at:end], kind), after
    except ValueError:
        return None


def _key_mark():
    """Where a value whose suffix is missing ends: where the next unit's key
    prefix is written, after the whitespace the suffix starts with ("" where the
    prefix has no letter or digit: too common in values to end one)."""
    core = ARG_KEY_PREFIX.strip()
    if not SUFFIXED_VALUES or not any(char.isalnum() for char in core):
        return ""
    return (
        ARG_VALUE_SUFFIX[: len(ARG_VALUE_SUFFIX) - len(ARG_VALUE_SUFFIX.lstrip())]
        + core
    )


_KEY_MARK = _key_mark()


def _suffixed_end(text, at, suffix):
    """Where a value read from ``at`` ends, as _read_to finds ``suffix``: (the
    value's end, the suffix's end), or None. Where the next unit's key
    (``_KEY_MARK``) comes first, the suffix is missing and the value ends at the
    key: the suffix is looked for only up to there, so a broken call is not read
    to the end of the text for it."""
    before, ending, _ = _SPLIT.get(suffix) or _split(suffix)
    if not (_KEY_MARK and ending):
        return _read_to(text, at, suffix)
    cut = _key_at(text, at, None, _KEY_MARK)
    if cut < 0:
        return _read_to(text, at, suffix)
    # A suffix whose core starts before the key's core (and the whitespace the
    # suffix starts with) ends comes first, unless the whole key is written
    # before the value that suffix ends.
    found = _read_to(text, at, suffix, cut + len(_KEY_MARK) + len(before) + len(ending))
    if found is None or cut + len(_KEY_MARK) <= found[0]:
        return cut, cut
    return found


def _key_at(text, at, limit, mark):
    """Where ``mark`` (from ``_key_mark``) is first written in ``text[at:limit]``,
    or -1: its prefix looked for as _read_to looks for a suffix (the common case,
    a value without the prefix's first character, is one memchr; str.find over a
    long value is many times slower), its whitespace then checked."""
    core = mark.lstrip()
    lead = mark[: len(mark) - len(core)]
    found = _find(text, core, at + len(lead), limit)
    while found >= 0 and not text.endswith(lead, at, found):
        found = _find(text, core, found + 1, limit)
    return found - len(lead) if found >= 0 else -1


if not JSON_CALLS:
    _read_call = _read_tagged_call
elif LITERAL == "json":
    _read_call = _read_json_call
else:
    _read_call = _read_literal_call


# A trigger that turns out not to start well-formed calls is content, and calls are
# looked for after it: every later trigger is tried, except those inside the text
# the broken calls were read from (up to near where they proved broken).
def _next_try(text, start, at, types, past_broken):
    """Where calls are looked for once those that the trigger at ``at`` starts (read
    from ``start``) proved broken: past their opener, or, where a later trigger
    is written, as ``past_broken(text, start, first, types)`` finds it (the
    stream's reader, ``_past_broken``, so that ``parse`` and the stream skip the
    same triggers; None: every trigger is tried). A later try starts past the
    text read to find that, so the tries of a text cost time in proportion to its
    length."""
    first = _past_start(text, at) if TRIGGER_ALSO else at + len(_SEEK)
    if past_broken is None:
        return first
    return past_broken(text, start, first, types)


def _find_calls(text, types, strict, past_broken=None):
    """(text before the calls, calls, text after them); ``past_broken``: as
    ``_next_try`` takes it."""
    if BARE_CALLS:
        # Nothing marks a call: the whole output is calls or it is content.
        found = _read_calls(text, _skip_space(text, 0), types)
        if found is not None and not _trailing(text[found[1] :]):
            return "", found[0], ""
        if CONTENT_AS_UNIT:
            return _calls_after_content(text, types)
        return text, [], ""
    at = 0
    while True:
        if TRIGGER_ALSO:
            at = _seek(text, at)
        else:
            at = text.find(_SEEK, at)
        if at < 0:
            break
        start = at
        while start > 0 and text[start - 1].isspace():
            start -= 1
        found = _read_calls(text, start, types)
        if found is not None:
            calls, end = found
            return text[:start], calls, text[end:]
        if strict:
            raise ValueError("malformed tool call at offset %d" % at)
        at = _next_try(text, start, at, types, past_broken)
    return text, [], ""


# Where the content is one unit of the turn (CONTENT_AS_UNIT), a call separator in
# it is tried as the start of the calls at most this many times: a failed try may
# read to the end of the output (the calls must run to it), so unbounded tries
# would cost the square of the output's length.
_UNIT_TRIES = 8


def _calls_after_content(text, types):
    """Where the content is one unit of the turn (CONTENT_AS_UNIT) and ``text``
    opens with its marker: (the content, the calls, "") for the calls that a call
    separator after it starts, where they run to the end of the output as a turn's
    calls do; else the whole text is content. A separator that starts no such calls
    is text of the content."""
    at = _skip_space(text, 0)
    if not text.startswith(CONTENT_START, at):
        return text, [], ""
    at += len(CONTENT_START)
    for _ in range(_UNIT_TRIES):
        at = text.find(_SEPARATOR_SEEK, at)
        if at < 0:
            break
        start = at
        while start > 0 and text[start - 1].isspace():
            start -= 1
        end = _match(text, start, CALL_SEPARATOR)
        found = _read_calls(text, end, types) if end >= 0 else None
        if found is not None and not _trailing(text[found[1] :]):
            return text[:start], found[0], ""
        at += len(_SEPARATOR_SEEK)
    return text, [], ""


def _trailing_markers():
    """What the text after calls drops where it starts or ends with it: the
    end-of-turn markers, then those a turn with calls ends with (END_AFTER_CALLS)."""
    return tuple(marker for marker in (*_TURN_ENDS, *END_AFTER_CALLS) if marker)


_TRAILING_MARKERS = _trailing_markers()


def _trailing(text):
    """What is left after the calls once end-of-turn markers are dropped."""
    rest = text.strip()
    if not rest:
        return rest  # the common case: nothing follows the calls
    changed = True
    while rest and changed:
        changed = False
        for marker in _TRAILING_MARKERS:
            if rest.endswith(marker):
                rest = rest[: len(rest) - len(marker)].strip()
                changed = True
            if rest.startswith(marker):
                rest = rest[len(marker) :].strip()
                changed = True
    return rest


def _calls_start(text, limit, types, past_broken=None):
    """Where the first calls that are well-formed start in ``text[:limit]`` (the
    whitespace before their trigger included), or -1."""
    at = 0
    while True:
        if TRIGGER_ALSO:
            at = _seek(text, at, limit)
        else:
            at = text.find(_SEEK, at, limit)
        if at < 0:
            break
        start = at
        while start > 0 and text[start - 1].isspace():
            start -= 1
        if _read_calls(text, start, types) is not None:
            return start
        at = _next_try(text, start, at, types, past_broken)
    return -1


def _calls_after(text, gap, types, strict, past_broken=None):
    """What follows a block of calls: ([(gap, text)], calls). Unless ``strict``,
    more blocks of calls are read; the text around them is content, each piece as
    ``_trailing`` leaves it, with the whitespace written around the block before it
    (``gap``: the whitespace before the first block)."""
    if not text or text.isspace():
        return [], []  # the common case: nothing follows the calls
    pieces: list = []
    calls: list = []
    at = 0
    while True:
        lead = _skip_space(text, at)
        gap += text[at:lead]
        # What the text starts with is dropped: whitespace and end-of-turn markers
        # (the stream drops them as they come); the calls are looked for after it.
        while True:
            for marker in _TRAILING_MARKERS:
                if text.startswith(marker, lead):
                    lead = _skip_space(text, lead + len(marker))
                    break
            else:
                break
        start = end = len(text)
        looked = lead
        while not strict:
            if TRIGGER_ALSO:
                found_at = _seek(text, looked)
            else:
                found_at = text.find(_SEEK, looked)
            if found_at < 0:
                break
            begin = found_at
            while begin > lead and text[begin - 1].isspace():
                begin -= 1
            found = _read_calls(text, begin, types)
            if found is not None:
                start, end = begin, found[1]
                calls += found[0]
                break
            looked = _next_try(text, begin, found_at, types, past_broken)
        piece = _trailing(text[at:start])
        if piece:
            pieces.append((gap, piece))
        if start == len(text):
            return pieces, calls
        gap = text[start : _skip_space(text, start)]
        at = end
