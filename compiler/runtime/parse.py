"""``parse``: a whole output read into an OpenAI assistant message."""

from __future__ import annotations

from .calls import _calls_after, _calls_start, _find_calls, _unique_ids
from .format import (
    BARE_CALLS,
    CONTENT_AFTER_CALLS,
    CONTENT_ALWAYS_WRAPPED,
    CONTENT_OPENED,
    CONTENT_START,
    CONTENT_WRAPPED,
    HAS_CALLS,
    HAS_REASONING,
    MESSAGE_OPENER,
    PROMPT_ENDS,
    REASONING_END,
    REASONING_START,
    SECTION_BEFORE_CONTENT,
    TURN_BREAK,
    TYPED_VALUES,
)
from .stream import _past_broken
from .text import (
    _SEEK,
    _before_break,
    _content_opener,
    _in_messages,
    _opened_by_prompt,
    _opener,
    _setting,
    _skip_space,
    _strip_stop,
    _without_echo,
)
from .tools import _schema_types


def _split_reasoning(text, opened, strict=False, types=None):
    """Reasoning (or None) and the text after it; ``opened``: whether the prompt
    opened the block (``_opened_by_prompt``; None: it may have, and the text is
    reasoning only where the closer comes). A block left open at the end of
    the text is reasoning; an empty one is none. Calls in a block that its closer
    follows are its text (the model wrote about them); where no closer follows,
    the first well-formed calls end it (the model left it open)."""
    if REASONING_START:
        stripped = text.lstrip()
        opener = _opener(stripped)
        if opener:
            body = stripped[opener:]
        elif opened or (opened is None and REASONING_END in text):
            body = text
        elif stripped.startswith(REASONING_END):
            # A closer with no opener: an empty block whose opener was elided
            # (the grammar does not admit it, so strict reading refuses it).
            if strict:
                raise ValueError("reasoning closer with no opener at the start")
            return None, stripped[len(REASONING_END) :]
        else:
            return None, text
    elif opened or REASONING_END in text:
        body = text  # no marker opens the block: the model starts inside it
    else:
        return None, text  # no delimiter ends it: an answer, as the history writes them
    end = body.find(REASONING_END)
    if HAS_CALLS and not BARE_CALLS and end < 0:
        start = _calls_start(body, len(body), types or {}, _past_broken)
        if start >= 0:
            if strict:
                raise ValueError("tool calls before the reasoning's closer")
            return body[:start].strip() or None, body[start:]
    if end < 0:
        return body.strip() or None, ""
    return body[:end].strip() or None, body[end + len(REASONING_END) :]


def _read_content(text, strict, opened=False):
    """The content between its markers; text outside them is kept. ``opened``: the
    prompt wrote the opener, so the text starts inside the content."""
    stripped = text.lstrip()
    opener, closer = _content_opener(stripped)
    if opener:
        body = stripped[opener:]
    elif opened:
        body = stripped
    else:
        if CONTENT_ALWAYS_WRAPPED and strict and stripped:
            raise ValueError("content does not start with %r" % CONTENT_START)
        return text.strip()  # the opener is written only after reasoning
    if not closer:
        return body.strip()
    end = body.find(closer)
    if end < 0:
        return body.strip()
    rest = body[end + len(closer) :]
    if strict and rest.strip():
        raise ValueError("text after %r at offset %d" % (closer, end))
    return (body[:end] + rest).strip()


def _opener_end(text):
    """Where the content's opener ends, where the text starts with it (else 0): strict
    reading looks for calls after it, since an opener that begins as a call does is
    no malformed call (Kimi K3: "<|open|>response<|sep|>" and "<|open|>tools<|sep|>",
    calls looked for by "<|open|>"). Reading leniently comes to the same."""
    stripped = text.lstrip()
    if BARE_CALLS or not CONTENT_WRAPPED or not CONTENT_START:
        return 0
    if not stripped.startswith(CONTENT_START):
        return 0
    return len(text) - len(stripped) + len(CONTENT_START)


def parse(text, *, tools=None, enable_thinking=None, strict=False):
    """Read a model's output into an OpenAI assistant message.

    ``enable_thinking``: True or False as the request set the template's thinking
    switch; None (a request that set none) reads the output as the template's own
    default has it (``SPEC["capabilities"]["thinking_switch"]["default"]``).
    Never raises on model output unless ``strict``: what fits no format is content,
    and text after the calls is kept as content too.
    """
    if not isinstance(text, str):
        raise TypeError("parse() takes the model's output as a str")
    if PROMPT_ENDS and not strict and text.lstrip().startswith(PROMPT_ENDS):
        # what the prompt wrote, written again (the grammars, and strict reading, keep
        # to the output after the prompt)
        text = _without_echo(text)
    if MESSAGE_OPENER and not strict:
        # a turn of several messages, as the template writes one (the grammars keep
        # to the template's: strict reading too)
        text = _in_messages(text)
    rest = _strip_stop(text, once=strict)
    types = _schema_types(tools if HAS_CALLS and TYPED_VALUES else None)
    reasoning = None
    if HAS_REASONING:
        opened = _opened_by_prompt(tools, enable_thinking)
        reasoning, rest = _split_reasoning(rest, opened, strict, types)
    tool_calls: list = []
    pieces: list = []  # the text after the calls: (the whitespace before, text)
    if HAS_CALLS:
        if SECTION_BEFORE_CONTENT and rest.lstrip().startswith(SECTION_BEFORE_CONTENT):
            # the section's opener, written before the content inside the section
            rest = rest.lstrip()[len(SECTION_BEFORE_CONTENT) :]
        whole = rest
        skip = _opener_end(whole) if strict else 0
        before, tool_calls, after = _find_calls(
            whole[skip:], types, strict, _past_broken
        )
        rest = whole[:skip] + before
        if tool_calls:
            gap = whole[len(rest) : _skip_space(whole, len(rest))]
            rest = _strip_stop(_before_break(rest) if TURN_BREAK else rest, strict)
            pieces, more = _calls_after(after, gap, types, strict, _past_broken)
            tool_calls += more
            if len(tool_calls) > 1:  # (one call's id is its own)
                _unique_ids(tool_calls)
        # Content may follow the calls where the template writes it there; a call
        # marker in it is a broken call, not content.
        for _, piece in pieces:
            if strict and not (CONTENT_AFTER_CALLS and _SEEK not in piece):
                raise ValueError("text after the tool calls: %r" % piece[:40])
    if CONTENT_WRAPPED:
        content = _read_content(rest, strict, CONTENT_OPENED[_setting(enable_thinking)])
    else:
        content = rest.strip()
    if pieces:
        # text between and after the calls joins as it is written around them
        parts = [content] if content else []
        for gap, piece in pieces:
            parts += [gap, piece] if parts else [piece]
        content = "".join(parts)
    return {
        "role": "assistant",
        "content": content or None,  # OpenAI's null where there is none
        "reasoning_content": reasoning,
        "tool_calls": tool_calls,
    }
