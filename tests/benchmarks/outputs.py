"""The model outputs the benchmark parses: a sentence of content, then one tool call whose
``code`` argument is a long Python program, sized to about 1 KB, 16 KB or 256 KB.

Each text is the template's own: it is rendered through the round-trip helpers
(``tests/roundtrip.py``: the prompt, then the prompt plus the assistant message, the
difference cut at the end of the turn). A template that drops an assistant's content when
the message also has calls (Hermes 2 Pro writes only the calls) cannot render both, so
there the call is rendered alone and the content is written in front of it by hand,
followed by a newline, as the template writes a content-only answer.
"""

from __future__ import annotations

from dataclasses import dataclass

from tests import roundtrip as rt

CONTENT = (
    "I'll add the retry helpers to the module and run it once to check that it "
    "imports cleanly and the handlers answer."
)
TOOL = "run_code"


@dataclass(frozen=True)
class Output:
    slug: str
    size: int  # the size asked for, in bytes of UTF-8
    text: str  # what the model wrote
    tools: list  # OpenAI-shaped definitions, as both parsers receive them
    content: str  # the content the text carries
    name: str  # the one call's function name
    arguments: dict  # and its arguments
    by_hand: bool  # content written in front of a rendered call


_BLOCK = '''

def handle_{i}(request, retries=3, *, store=None):
    """Handle request #{i}: read its payload, check it and store it."""
    payload = json.loads(request.body or "{{}}")
    if not isinstance(payload, dict):
        raise ValueError(f"handler {i}: bad payload {{payload!r}}")
    path = "C:\\\\data\\\\requests\\\\{i}.json"
    for attempt in range(retries):
        try:
            (store or STORE).put(path, payload, tags=["r{i}", 'attempt'])
            return {{"ok": True, "id": {i}, "attempt": attempt}}
        except OSError as error:  # a flaky disk: try again
            log.warning("handle_{i}: %s (attempt %d)\\n", error, attempt)
    return {{"ok": False, "id": {i}, "error": "gave up after %d tries" % retries}}
'''

_HEADER = '''"""Request handlers, one per endpoint."""

import json
import logging

log = logging.getLogger(__name__)
STORE = None
'''


def python_code(length: int) -> str:
    """A Python module of about ``length`` characters, cut at a line's end."""
    parts = [_HEADER]
    total = len(_HEADER)
    i = 0
    while total < length:
        block = _BLOCK.format(i=i)
        parts.append(block)
        total += len(block)
        i += 1
    code = "".join(parts)[:length]
    return code[: code.rfind("\n") + 1] if "\n" in code else code


def _render(slug: str, content: str, arguments: dict):
    kind = rt.Kind("bench", content, calls=((TOOL, arguments),))
    return rt.build_case(slug, kind)


def _text(slug: str, arguments: dict) -> tuple[str, bool]:
    """The model's text for content + the call, and whether content was added by hand."""
    case = _render(slug, CONTENT, arguments)
    if case is not None:
        return case.text, False
    case = _render(slug, "", arguments)
    if case is None:
        raise RuntimeError(f"{slug}: the template cannot render a {TOOL} call")
    return CONTENT + "\n" + case.text, True


def build(slug: str, size: int) -> Output:
    """One output of about ``size`` bytes in the format of ``slug``."""
    length = max(size - 400, 100)
    for _ in range(4):  # the format's overhead and escaping: converge on the size
        arguments = {"language": "python", "code": python_code(length)}
        text, by_hand = _text(slug, arguments)
        error = size - len(text.encode("utf-8"))
        if abs(error) <= 80:
            break
        length = max(length + error, 100)
    return Output(
        slug,
        size,
        text,
        [rt.TOOLS[TOOL]],
        CONTENT,
        TOOL,
        arguments,
        by_hand,
    )
