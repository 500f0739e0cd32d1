"""DESIGN.md's round trip: the template is the oracle.

Render a conversation with the template, cut the model's part out of the render, parse
it with the generated parser, and compare the parsed message with the one rendered.

History is a system and a user message (the user message alone where the template has
no system role). ``prefix`` renders the history with ``add_generation_prompt=True``;
``full`` renders the history plus the assistant message with
``add_generation_prompt=False``; both with the kind's ``enable_thinking`` (None: the
template's thinking switch left undefined, and ``parse`` called without it) and, for
the tool kinds, the same ``tools`` (converted to the template's tool shape).

Where the model's text ends:

- Content kinds (``CONTENT_KINDS``) cut the text right after the last occurrence of the
  message's content: whatever the template writes after it is the end of the turn.
- Tool kinds (``TOOL_KINDS``) cannot cut after the last argument value: what follows
  may still belong to the call (a closing brace, ``</function>``, ``</tool_call>``).
  They cut the end-of-turn markers the spec records (``end_of_turn.markers``, plus the
  eos token when ``end_of_turn.tokenizer_eos``: the placeholder the renderer uses when
  the real string is unknown) and whitespace off the end of the text, repeatedly until
  nothing changes. Call closers are never cut. Then, if one of those markers still
  occurs after the last of the message's own strings (a template that writes a
  generation prompt after the turn whatever it is asked), the text is cut at the first
  such marker too: a model stops there. Where the spec records no marker, an
  end-of-turn text the template writes stays in; ``parse`` must tolerate a trailing
  end-of-turn marker anyway (it strips one found at the end).

A case is expressible when ``full`` starts with ``prefix`` and the text contains the
message's content, reasoning, tool names and every string argument value (nested ones
too), each either as given or JSON-escaped, and (for reasoning given as typed content
blocks) the template read the blocks rather than printing them; otherwise
``make_case`` returns ``None``. A call without content is rendered with content ``""``,
or with ``None`` where ``""`` is refused or loses the case. Arguments are passed as an
object, or as JSON text where the template takes only text
(``capabilities.string_arguments`` without ``object_arguments``); call ids are nine
alphanumerics, which every template accepts.

A case passes when the parsed message equals the original (content and reasoning with
surrounding whitespace stripped, ``None`` reasoning equal to ``""``; tool calls in the
same order with equal names and arguments equal as JSON values; ids compared only where
the original id appears in the text), or when the parsed message renders back to
exactly ``full`` (templates that normalise what they are given) with the same calls,
by count and names, as the original: where a call renders like plain text (a bare
JSON object), a parse that kept the call as content would render back too.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import json
import os
from dataclasses import dataclass, field

import yaml

from compiler.conversation import to_tool_shape
from compiler.model import thinking_switch
from compiler.probe import reasoning_message
from compiler.render import EOS_PLACEHOLDER, ChatTemplate, RenderError, RenderInputs

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPECS = os.path.join(ROOT, "specs")

SYSTEM = "You are a helpful assistant."
USER = "What is six times seven?"


@dataclass(frozen=True)
class Kind:
    name: str
    content: str
    reasoning: str | None = None
    # The request's thinking setting; None: it gives none (UNSWITCHED_KINDS).
    enable_thinking: bool | None = True
    # Tool calls as (function name, arguments object); () for the content kinds.
    calls: tuple = field(default=(), hash=False)


CONTENT_KINDS = (
    Kind("content", "The answer is 42."),
    Kind("content_thinking_off", "The answer is 42.", enable_thinking=False),
    Kind(
        "multiline_markup",
        "Here it is:\n\n```python\ndef f(x):\n    return {\"a\": [x, 'b']}\n```\n"
        "<b>bold</b> & {braces} [brackets] \\ back\\slash\n- item one\n- item two",
    ),
    Kind(
        "reasoning_content", "It is 42.", reasoning="Six sevens: 6*7 = 42. Check: 7*6."
    ),
)

# The functions the tool kinds call, in OpenAI's shape, with JSON schemas that type
# every argument the kinds pass.
TOOLS = {
    "get_weather": {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Get the current weather in a city.",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": "The city name."},
                    "unit": {
                        "type": "string",
                        "enum": ["celsius", "fahrenheit"],
                        "description": "Temperature unit.",
                    },
                },
                "required": ["city"],
            },
        },
    },
    "get_time": {
        "type": "function",
        "function": {
            "name": "get_time",
            "description": "Get the current local time in a time zone.",
            "parameters": {
                "type": "object",
                "properties": {
                    "timezone": {"type": "string", "description": "An IANA time zone."}
                },
                "required": ["timezone"],
            },
        },
    },
    "run_code": {
        "type": "function",
        "function": {
            "name": "run_code",
            "description": "Run a program and return what it prints.",
            "parameters": {
                "type": "object",
                "properties": {
                    "language": {"type": "string", "enum": ["python", "bash"]},
                    "code": {"type": "string", "description": "The program."},
                    "stdin": {
                        "type": "string",
                        "description": "Text fed to the program.",
                    },
                    "args": {"type": "array", "items": {"type": "string"}},
                    "options": {
                        "type": "object",
                        "properties": {
                            "timeout": {"type": "integer"},
                            "ratio": {"type": "number"},
                            "verbose": {"type": "boolean"},
                            "env": {
                                "type": "object",
                                "additionalProperties": {"type": "string"},
                            },
                            "ports": {"type": "array", "items": {"type": "integer"}},
                        },
                    },
                    "sandbox": {"type": "boolean"},
                    "max_lines": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
                },
                "required": ["language", "code"],
            },
        },
    },
    # Called by the property-based test with generated values.
    "save_record": {
        "type": "function",
        "function": {
            "name": "save_record",
            "description": "Store a record.",
            "parameters": {
                "type": "object",
                "properties": {
                    "text": {"type": "string"},
                    "count": {"type": "integer"},
                    "flag": {"type": "boolean"},
                    "maybe": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
                    "items": {"type": "array", "items": {"type": "string"}},
                    "meta": {
                        "type": "object",
                        "additionalProperties": {
                            "anyOf": [
                                {"type": "string"},
                                {"type": "integer"},
                                {"type": "boolean"},
                            ]
                        },
                    },
                },
                "required": ["text", "count", "flag", "maybe", "items", "meta"],
            },
        },
    },
}

WEATHER_TOKYO = ("get_weather", {"city": "Tokyo", "unit": "celsius"})

TRICKY_ARGUMENTS = {
    "language": "python",
    "code": (
        'import json\n\ndef greet(name):\n    print(f"Hello, {name}!\\n")\n'
        "    return {'ok': True, \"path\": \"C:\\\\temp\\\\new\"}\n\ngreet('wörld')\n"
    ),
    "stdin": 'She said "hi" \\ then left.\tTab; naïve café, 日本語, emoji 🙂 <tag> & {x}',
    "args": ["--name", "two words", 'quote"d', ""],
    "options": {
        "timeout": 30,
        "ratio": 0.25,
        "verbose": True,
        "env": {"PATH": "/usr/bin:/bin", "GREETING": "Grüß Gott"},
        "ports": [8080, -1, 0],
    },
    "sandbox": False,
    "max_lines": None,
}

TOOL_KINDS = (
    Kind("tool_call", "", calls=(WEATHER_TOKYO,)),
    Kind("tool_call_thinking_off", "", enable_thinking=False, calls=(WEATHER_TOKYO,)),
    Kind(
        "content_then_tool_call",
        "Let me look that up for you.",
        calls=(("get_weather", {"city": "Paris", "unit": "fahrenheit"}),),
    ),
    Kind("tool_call_tricky_arguments", "", calls=(("run_code", TRICKY_ARGUMENTS),)),
    Kind(
        "parallel_tool_calls",
        "",
        calls=(
            ("get_weather", {"city": "Lisbon"}),
            ("get_time", {"timezone": "Europe/Lisbon"}),
        ),
    ),
    Kind(
        "reasoning_then_tool_call",
        "",
        reasoning="The user wants current conditions, so I need live data first.",
        calls=(("get_weather", {"city": "Berlin", "unit": "celsius"}),),
    ),
)

ALL_KINDS = CONTENT_KINDS + TOOL_KINDS

# The kinds as a request that gives no thinking switch sends them (most requests to a
# server): rendered with every switch left undefined, parsed with enable_thinking
# left out. A kind's thinking-off variant is the same case then, and is left out.
UNSWITCHED_KINDS = tuple(
    dataclasses.replace(kind, enable_thinking=None) for kind in ALL_KINDS if kind.enable_thinking
)


@dataclass
class Case:
    slug: str
    kind: Kind
    text: str  # what the model wrote
    full: str
    prefix: str
    message: dict
    tools: list | None = None  # OpenAI-shaped definitions, as parse() receives them


@functools.lru_cache(maxsize=None)
def _spec_text(slug: str) -> str:
    with open(os.path.join(SPECS, f"{slug}.yaml"), encoding="utf-8") as handle:
        return handle.read()


def load_spec(slug: str) -> dict:
    return yaml.safe_load(_spec_text(slug))


def slugs() -> list[str]:
    if not os.path.isdir(SPECS):
        return []
    return sorted(name[:-5] for name in os.listdir(SPECS) if name.endswith(".yaml"))


def template_for(spec: dict) -> ChatTemplate | None:
    switch = spec["capabilities"].get("thinking_switch")
    return _template(
        spec["template"]["path"],
        json.dumps(spec["render_inputs"], sort_keys=True),
        json.dumps(switch, sort_keys=True) if switch else None,
    )


@functools.lru_cache(maxsize=None)
def _template(
    recorded_path: str, inputs_json: str, switch_json: str | None = None
) -> ChatTemplate | None:
    path = os.path.join(SPECS, recorded_path)  # a spec records it relative to itself
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as handle:
        source = handle.read()
    inputs = json.loads(inputs_json)
    template = ChatTemplate(
        source,
        os.path.relpath(path, ROOT),
        RenderInputs(inputs["bos_token"], inputs["eos_token"], inputs["variables"]),
    )
    # as the analysis rendered it: enable_thinking sets the template's switch
    # (enable_thinking=None leaves it undefined)
    switch = thinking_switch(json.loads(switch_json)) if switch_json else None
    if switch is not None:
        template.thinking_switch = {value: switch.setting(value) for value in (True, False)}
    return template


def history(spec: dict) -> list[dict]:
    user = {"role": "user", "content": USER}
    if spec["capabilities"]["system_role"]:
        return [{"role": "system", "content": SYSTEM}, user]
    return [user]


# ---------------------------------------------------------------------------
# tools and calls


def tool_definitions(kind: Kind) -> list[dict] | None:
    """OpenAI-shaped definitions of the functions the kind calls (None without calls)."""
    if not kind.calls:
        return None
    names = list(dict.fromkeys(name for name, _ in kind.calls))
    return [TOOLS[name] for name in names]


def template_tools(spec: dict, tools: list[dict] | None) -> list[dict] | None:
    """The definitions in the shape the template reads."""
    if tools is None:
        return None
    shape = spec["render_inputs"].get("tool_shape", "openai")
    return [to_tool_shape(tool, shape) for tool in tools]


def string_arguments(spec: dict) -> bool:
    """Whether the template takes arguments as JSON text rather than as an object."""
    caps = spec["capabilities"]
    return not caps.get("object_arguments") and bool(caps.get("string_arguments"))


def call_id(index: int) -> str:
    # Nine alphanumerics: some templates insist on [a-zA-Z0-9]{9}.
    return f"call{index + 1:05d}"


def tool_call(
    spec: dict, index: int, name: str, arguments, call_ident: str | None = None
):
    if string_arguments(spec) and not isinstance(arguments, str):
        arguments = json.dumps(arguments, ensure_ascii=False)
    return {
        "id": call_id(index) if call_ident is None else call_ident,
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }


def assistant_message(
    spec: dict, content, reasoning: str | None, tool_calls: list[dict] | None
) -> dict | None:
    """The message carrying content, reasoning (in the field the template reads) and
    tool calls; None when the template has no way to carry the reasoning."""
    if reasoning:
        field_name = spec["capabilities"]["reasoning_field"]
        if field_name is None:
            return None
        message = reasoning_message(field_name, reasoning, content or "")
        if content is None and not field_name.startswith("block:"):
            message["content"] = None
    else:
        message = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return message


_KIND_CONTENT = object()


def message_for(spec: dict, kind: Kind, content=_KIND_CONTENT) -> dict | None:
    """The kind's assistant message; ``content`` replaces the kind's (``None`` too)."""
    if content is _KIND_CONTENT:
        content = kind.content
    calls = [
        tool_call(spec, i, name, args) for i, (name, args) in enumerate(kind.calls)
    ]
    return assistant_message(spec, content, kind.reasoning, calls)


# ---------------------------------------------------------------------------
# building a case


def _string_leaves(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _string_leaves(item)
    elif isinstance(value, list):
        for item in value:
            yield from _string_leaves(item)


def _written(text: str, value: str) -> bool:
    """``value`` occurs in ``text`` as given or JSON-escaped."""
    forms = (
        value,
        json.dumps(value, ensure_ascii=False)[1:-1],
        json.dumps(value)[1:-1],
    )
    return any(form in text for form in forms)


def _needles(kind: Kind) -> list[str]:
    """What the text must show: content, reasoning, tool names, string argument values."""
    needles = [kind.content] if kind.content else []
    if kind.reasoning:
        needles.append(kind.reasoning)
    for name, arguments in kind.calls:
        needles.append(name)
        needles.extend(value for value in _string_leaves(arguments) if value)
    return needles


def _expresses(text: str, kind: Kind) -> bool:
    return all(_written(text, needle) for needle in _needles(kind))


def _printed_blocks(spec: dict, text: str) -> bool:
    """Whether the template printed our typed content blocks instead of reading them."""
    field_name = spec["capabilities"]["reasoning_field"] or ""
    if not field_name.startswith("block:"):
        return False
    block_type = field_name[len("block:") :].split("/")[0]
    return f"'type': '{block_type}'" in text or f'"type": "{block_type}"' in text


def _end_of_last_needle(text: str, kind: Kind) -> int:
    """Where the last of the message's own strings ends in the text (0 if none shows)."""
    end = 0
    for needle in _needles(kind):
        for form in {
            needle,
            json.dumps(needle, ensure_ascii=False)[1:-1],
            json.dumps(needle)[1:-1],
        }:
            at = text.rfind(form)
            if at >= 0:
                end = max(end, at + len(form))
    return end


def end_of_turn_markers(spec: dict, template: ChatTemplate) -> list[str]:
    end = spec.get("end_of_turn") or {}
    markers = [m for m in end.get("markers") or [] if m]
    if end.get("tokenizer_eos"):
        markers += [template.inputs.eos, EOS_PLACEHOLDER]
    return markers


def cut_end_of_turn(text: str, markers: list[str]) -> str:
    """Drop end-of-turn markers and whitespace off the end, until nothing changes."""
    while True:
        before = text
        text = text.rstrip()
        for marker in markers:
            if text.endswith(marker):
                text = text[: -len(marker)]
        if text == before:
            return text


def cut_tool_text(text: str, kind: Kind, markers: list[str]) -> str:
    """The model's part of a tool kind's render: see the module docstring."""
    text = cut_end_of_turn(text, markers)
    # A template may write more after the end of the turn (a generation prompt it
    # writes unconditionally): the model stops at the first marker after its own text.
    start = _end_of_last_needle(text, kind)
    ends = [at for at in (text.find(marker, start) for marker in markers) if at >= 0]
    if ends:
        text = cut_end_of_turn(text[: min(ends)], markers)
    return text


def _render_pair(spec, template, message, kind, tools):
    prefix = template.render(
        history(spec),
        tools=tools,
        add_generation_prompt=True,
        enable_thinking=kind.enable_thinking,
    )
    full = template.render(
        history(spec) + [message], tools=tools, enable_thinking=kind.enable_thinking
    )
    return prefix, full


@functools.lru_cache(maxsize=None)
def make_case(slug: str, kind: Kind) -> Case | None:
    """The case, or None when the template cannot express it (cached: the case kinds
    are few and fixed; generated kinds go through ``build_case``)."""
    return build_case(slug, kind)


def build_case(slug: str, kind: Kind) -> Case | None:
    """The case, or None when the template cannot express it."""
    spec = load_spec(slug)
    template = template_for(spec)
    if template is None:
        return None
    if kind.calls:
        return _make_tool_case(slug, kind, spec, template)
    message = message_for(spec, kind)
    if message is None:
        return None
    try:
        prefix, full = _render_pair(spec, template, message, kind, None)
    except RenderError:
        return None
    if not full.startswith(prefix):
        return None
    text = full[len(prefix) :]
    at = text.rfind(kind.content)
    if at < 0 or (kind.reasoning and kind.reasoning not in text):
        return None
    # Drop what the template writes after the content: the end of the turn.
    text = text[: at + len(kind.content)]
    return Case(slug, kind, text, full, prefix, message)


def _make_tool_case(slug: str, kind: Kind, spec: dict, template: ChatTemplate):
    caps = spec["capabilities"]
    if not caps.get("tool_calls"):
        return None
    if len(kind.calls) > 1 and not caps.get("parallel_tool_calls"):
        return None
    tools = tool_definitions(kind)
    shaped = template_tools(spec, tools)
    markers = end_of_turn_markers(spec, template)
    # A call without content: "" first; None where the template refuses "" or loses
    # the case with it.
    contents = [kind.content] if kind.content else ["", None]
    for content in contents:
        message = message_for(spec, kind, content)
        if message is None:
            return None
        try:
            prefix, full = _render_pair(spec, template, message, kind, shaped)
        except RenderError:
            continue
        if not full.startswith(prefix):
            continue
        text = cut_tool_text(full[len(prefix) :], kind, markers)
        if _expresses(text, kind) and not _printed_blocks(spec, text):
            return Case(slug, kind, text, full, prefix, message, tools)
    return None


# ---------------------------------------------------------------------------
# checking a case


def build_invented(out, names=None):
    """Build the invented templates (tests/invented/; only ``names`` where given)
    into ``out`` as a user's templates are built: specs in ``out/specs``, modules in
    ``out/generated``. Returns the build's report."""
    from compiler.build import build
    from compiler.sources import discover

    folder = os.path.join("tests", "invented")
    cwd = os.getcwd()
    os.chdir(ROOT)  # specs record template paths relative to the repository
    try:
        paths = None if names is None else [os.path.join(folder, f"{n}.jinja") for n in names]
        found = discover(folder) if paths is None else discover(None, paths)
        return build(found, str(out / "specs"), str(out / "generated"), log=lambda m: None)
    finally:
        os.chdir(cwd)


def module(slug: str):
    return importlib.import_module(f"generated.{slug}")


def json_equal(left, right) -> bool:
    """Equality of JSON values: true is not 1, 1 equals 1.0, objects ignore key order."""
    if isinstance(left, bool) or isinstance(right, bool):
        return isinstance(left, bool) and isinstance(right, bool) and left == right
    if isinstance(left, (int, float)) and isinstance(right, (int, float)):
        return left == right
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(
            json_equal(left[k], right[k]) for k in left
        )
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(map(json_equal, left, right))
    return type(left) is type(right) and left == right


def _arguments_value(arguments):
    """The JSON value of a call's arguments (an object, or JSON text)."""
    if isinstance(arguments, str):
        return json.loads(arguments)
    return arguments


def _calls_differ(case: Case, parsed_calls) -> str | None:
    """Why the parsed calls differ from the case's, or None when they match."""
    want = case.message.get("tool_calls") or []
    if not isinstance(parsed_calls, list):
        return "tool_calls is not a list"
    if len(parsed_calls) != len(want):
        return f"{len(parsed_calls)} tool calls, expected {len(want)}"
    for index, (got, expected) in enumerate(zip(parsed_calls, want, strict=True)):
        if not isinstance(got, dict) or not isinstance(got.get("function"), dict):
            return f"call {index}: not an OpenAI tool call"
        function = got["function"]
        if function.get("name") != expected["function"]["name"]:
            return f"call {index}: name {function.get('name')!r}"
        arguments = function.get("arguments")
        if not isinstance(arguments, str):
            return f"call {index}: arguments are not JSON text"
        try:
            value = json.loads(arguments)
        except ValueError:
            return f"call {index}: arguments are not valid JSON"
        if not json_equal(value, _arguments_value(expected["function"]["arguments"])):
            return f"call {index}: arguments differ"
        if expected["id"] in case.text and got.get("id") != expected["id"]:
            return f"call {index}: id {got.get('id')!r}"
    return None


def _same_call_names(case: Case, parsed: dict) -> bool:
    want = [call["function"]["name"] for call in case.message.get("tool_calls") or []]
    calls = parsed.get("tool_calls")
    if not isinstance(calls, list):
        return False
    try:
        return [call["function"]["name"] for call in calls] == want
    except (KeyError, TypeError):
        return False


def _differs(case: Case, parsed: dict) -> str | None:
    """Why the parsed message differs from the original, or None when it is equal."""
    reasons = []
    calls = _calls_differ(case, parsed.get("tool_calls"))
    if calls:
        reasons.append(calls)
    content = parsed.get("content")
    if content is not None and not isinstance(content, str):
        reasons.append("content is neither a string nor None")
    elif content == "":
        reasons.append("content is '' (None where there is none)")
    elif (content or "").strip() != case.kind.content.strip():
        # None is the empty original's reading, whether it was written "" or None
        reasons.append("content differs")
    reasoning = parsed.get("reasoning_content")
    if reasoning is not None and not isinstance(reasoning, str):
        reasons.append("reasoning_content is neither a string nor None")
    elif (reasoning or "").strip() != (case.kind.reasoning or "").strip():
        reasons.append("reasoning differs")
    return "; ".join(reasons) or None


def _rerender(case: Case, parsed: dict) -> str | None:
    """The parsed message rendered after the history as the case was; None on failure."""
    spec = load_spec(case.slug)
    template = template_for(spec)
    assert template is not None  # the case was rendered with it
    calls = []
    try:
        for index, got in enumerate(parsed.get("tool_calls") or []):
            function = got["function"]
            arguments = function["arguments"]
            if not string_arguments(spec):
                arguments = json.loads(arguments)
            # Without a parsed id, one that is not the original's: a template that
            # writes ids must not get the original back for free.
            ident = (
                got.get("id") if isinstance(got.get("id"), str) else f"noid{index:05d}"
            )
            calls.append(tool_call(spec, index, function["name"], arguments, ident))
    except (KeyError, TypeError, ValueError):
        return None
    content = parsed.get("content")
    if content == "":
        return None  # not the message's shape, whatever it renders to
    if content is None and case.message.get("content") is not None:
        content = ""  # none, rendered as make_case writes none: "" unless it took None
    reasoning = parsed.get("reasoning_content")
    if spec["capabilities"]["reasoning_field"] is None:
        reasoning = None  # no way to give it back: render what the template can take
    message = assistant_message(spec, content, reasoning, calls)
    if message is None:
        return None
    try:
        return template.render(
            history(spec) + [message],
            tools=template_tools(spec, case.tools),
            enable_thinking=case.kind.enable_thinking,
        )
    except RenderError:
        return None


def parse(case: Case, parser=None) -> dict:
    parser = parser or module(case.slug).parse
    if case.kind.enable_thinking is None:  # the request gave none: parse's own default
        return parser(case.text, tools=case.tools)
    return parser(
        case.text, tools=case.tools, enable_thinking=case.kind.enable_thinking
    )


def check(case: Case, parser=None) -> tuple[bool, str]:
    """(passed, explanation): "equal", "re-renders identically", or a JSON report.

    ``parser`` stands in for the generated module's ``parse`` (to test the checker)."""
    parsed = parse(case, parser)
    why = _differs(case, parsed)
    if why is None:
        return True, "equal"
    # A template that normalises the message passes when the parsed message renders
    # back to the same text. The calls must still be the same calls (count and names):
    # where a call renders like plain text, text read as content would render back too.
    if _same_call_names(case, parsed) and _rerender(case, parsed) == case.full:
        return True, "re-renders identically"
    return False, json.dumps(
        {"why": why, "text": case.text, "parsed": parsed, "expected": case.message},
        ensure_ascii=False,
    )
