"""The vLLM plugin (``python -m compiler plugin vllm``) through vLLM's own classes
(``make test-servers``; skipped where vLLM is not installed).

For every corpus format with tool calls or reasoning, every round-trip text
(tests/roundtrip.py) goes through the plugin as vLLM's serving layer drives it: the
plugin file is imported as ``--tool-parser-plugin`` / ``--reasoning-parser-plugin``
import it, vLLM's ``ParserManager`` composes the parser class the server would, and
the text is fed to ``ChatStreamProcessor.step`` (what the chat endpoint calls per
chunk) with a ``ChatCompletionRequest``, then given whole to ``Parser.parse`` (the
non-streamed reply). The oracle is the generated module's ``parse`` on the same text:

- streamed one character per delta, in two deltas cut at every point (every point
  for texts of at most ``EVERY_POINT_UP_TO`` characters, else ``SPREAD_POINTS``
  points spread evenly, to keep the run within minutes), and as one delta: the
  deltas merged as a client merges them give parse's content, reasoning and calls
  (names; arguments equal as JSON), the calls the reader abandoned left out;
- each call's first delta carries its id, type and name, and indices only grow;
- the non-streamed reply gives the same message.

With the tool parser alone (``--tool-call-parser`` without the reasoning parser), one
delta and a character a delta give the same message too (a non-streamed reply has no
place for reasoning in vLLM: it gives the content and calls).

Plus: ``adjust_request`` keeps special tokens and sets the structural tag for
"required", a named function and strict tools only; a plugin file imports nothing of
the compiler (read from its text, and loaded in an interpreter where the compiler
cannot be imported).
"""

from __future__ import annotations

import ast
import functools
import json
import subprocess
import sys
from pathlib import Path

import pytest

from compiler import model
from compiler import spec as specs
from compiler.codegen import plugin_vllm
from tests.servers.build_plugin import standalone_text
from tests import roundtrip as rt

pytest.importorskip("vllm")

from vllm.entrypoints.openai.chat_completion.protocol import (  # noqa: E402
    ChatCompletionRequest,
)
from vllm.entrypoints.openai.chat_completion.stream_processor import (  # noqa: E402
    ChatStreamProcessor,
)
from vllm.parser.parser_manager import ParserManager  # noqa: E402
from vllm.reasoning import ReasoningParserManager  # noqa: E402
from vllm.tool_parsers import ToolParserManager  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent.parent
# Every corpus text is shorter (1,211 characters at most): each is cut at every point.
EVERY_POINT_UP_TO = 1500
SPREAD_POINTS = 200
MESSAGES = [{"role": "user", "content": rt.USER}]


@functools.cache
def fmt_of(slug: str) -> model.Format:
    path = str(ROOT / "specs" / f"{slug}.yaml")
    spec = specs.load(path)
    specs.validate(spec, path)
    spec, _ = specs.resolve(spec, path)
    return model.build(spec, slug=slug, origin=path)


def _served(slug: str) -> bool:
    fmt = fmt_of(slug)
    return fmt.has_calls or fmt.reasoning.has_block


SLUGS = [slug for slug in rt.slugs() if _served(slug)]


def plugin_text(slug: str) -> str:
    return plugin_vllm.text(fmt_of(slug), standalone_text(fmt_of(slug)), f"chatfmt-{slug}")


@functools.cache
def parser_class(slug: str, tmp_dir: str):
    """The Parser class vLLM composes from the plugin, as `vllm serve` with both
    plugin flags and --enable-auto-tool-choice does."""
    path = Path(tmp_dir) / f"chatfmt_vllm_{slug}.py"
    path.write_text(plugin_text(slug), encoding="utf-8")
    ToolParserManager.import_tool_parser(str(path))
    ReasoningParserManager.import_reasoning_parser(str(path))
    name = f"chatfmt-{slug}"
    return ParserManager.get_parser(
        tool_parser_name=name, reasoning_parser_name=name, enable_auto_tools=True
    )


@pytest.fixture(scope="module")
def plugin_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("plugins"))


def template_kwargs(case) -> dict | None:
    """The chat-template arguments the case's prompt was rendered with: the
    template's thinking switch set as the case's setting says, under its own names and
    values (Kimi K3's ``thinking``; such a template ignores ``enable_thinking``), else
    ``enable_thinking``; None for a case rendered with the switch left undefined (a
    request without chat-template arguments)."""
    thinking = case.kind.enable_thinking
    if thinking is None:
        return None
    switch = None
    if (ROOT / "specs" / f"{case.slug}.yaml").exists():  # (else an invented template's)
        switch = fmt_of(case.slug).spec["capabilities"].get("thinking_switch")
    if switch is None:
        return {"enable_thinking": thinking}
    key = "thinking_on" if thinking else "thinking_off"
    return {name: values[key] for name, values in switch["variables"].items() if key in values}


def request_for(case) -> ChatCompletionRequest:
    return ChatCompletionRequest(
        messages=MESSAGES,
        model="m",
        tools=case.tools,
        tool_choice="auto" if case.tools else "none",
        chat_template_kwargs=template_kwargs(case),
    )


def new_parser(cls, case, tokenizer=None):
    # The tokenizer is not read while parsing text: none is loaded (but where the
    # prompt is handed over: PromptTokenizer).
    return cls(tokenizer, request_for(case).tools, chat_template_kwargs=template_kwargs(case))


def cut_points(text: str) -> list[int]:
    if len(text) <= EVERY_POINT_UP_TO:
        return list(range(1, len(text)))
    step = len(text) / (SPREAD_POINTS + 1)
    return sorted({round(step * k) for k in range(1, SPREAD_POINTS + 1)} - {0, len(text)})


class PromptTokenizer:
    """A tokenizer whose token ids are characters' code points: enough for the plugin
    to decode the prompt vLLM hands its reasoning parser."""

    def decode(self, ids, skip_special_tokens=True):
        return "".join(map(chr, ids))

    @staticmethod
    def encode(text: str) -> list[int]:
        return [ord(char) for char in text]


def streamed(cls, case, request, chunks: list[str], prompt: str | None = None) -> dict:
    """The message a client merges from the deltas vLLM streams for ``chunks`` (with
    ``prompt``, the rendered prompt vLLM hands the parser with the first chunk)."""
    parser = new_parser(cls, case, PromptTokenizer() if prompt is not None else None)
    processor = ChatStreamProcessor(request, parser, enable_auto_tools=True, parser_cls=cls)
    prompt_ids = PromptTokenizer.encode(prompt) if prompt is not None else []
    content: list = []
    reasoning: list = []
    calls: dict = {}
    for number, chunk in enumerate(chunks):
        last = number == len(chunks) - 1
        step = processor.step(chunk, [1], "stop" if last else None, prompt_ids if number == 0 else None)
        delta = step.delta
        if delta is None:
            continue
        content.append(delta.content or "")
        reasoning.append(delta.reasoning or "")
        for part in delta.tool_calls:
            if part.index not in calls:
                assert not calls or part.index > max(calls), "a call index reused or out of order"
                assert part.id and part.type == "function", "a call's first delta has no id"
                assert part.function is not None and part.function.name, "... no name"
                calls[part.index] = [part.function.name, ""]
            assert part.id is None or part.id, part
            calls[part.index][1] += (part.function.arguments or "") if part.function else ""
    readers = [
        getattr(owner, "_reader", None) for owner in (parser.tool_parser, parser.reasoning_parser)
    ]
    for reader in readers:
        for index in reader.parser.abandoned if reader is not None else ():
            calls.pop(index, None)
    return {
        "content": "".join(content) or None,  # merged deltas with no content text: None
        "reasoning": "".join(reasoning) or None,
        "calls": [calls[index] for index in sorted(calls)],
    }


def expected(slug: str, case) -> dict:
    return as_compared(rt.parse(case))  # (a case without the setting: parse's default)


def as_compared(message: dict) -> dict:
    return {
        "content": message["content"],
        "reasoning": message["reasoning_content"] or None,
        "calls": [
            [call["function"]["name"], call["function"]["arguments"]]
            for call in message["tool_calls"]
        ],
    }


def same(got: dict, want: dict) -> bool:
    if got["content"] != want["content"] or got["reasoning"] != want["reasoning"]:
        return False
    if len(got["calls"]) != len(want["calls"]):
        return False
    for (name, arguments), (want_name, want_arguments) in zip(got["calls"], want["calls"], strict=True):
        try:
            decoded = json.loads(arguments)
        except ValueError:
            return False
        if name != want_name or not rt.json_equal(decoded, json.loads(want_arguments)):
            return False
    return True


def one_shot(cls, case, request, prompt: str | None = None) -> dict:
    parser = new_parser(cls, case, PromptTokenizer() if prompt is not None else None)
    if prompt is not None:  # as vLLM's chat endpoint does before it reads the output
        parser.set_prompt_token_ids(PromptTokenizer.encode(prompt))
    reasoning, content, calls = parser.parse(case.text, request, enable_auto_tools=True)
    for call in calls or ():
        assert call.id, "a call without an id"
    return {
        "content": content,  # None where there is none, as vLLM returns it
        "reasoning": reasoning or None,
        "calls": [[call.name, call.arguments] for call in calls or ()],
    }


def cases(slug: str) -> list:
    found = [rt.make_case(slug, kind) for kind in rt.ALL_KINDS]
    return [case for case in found if case is not None]


def splits(text: str) -> list[tuple[str, list[str]]]:
    """(how, chunks) for each way the text is fed."""
    ways = [("one delta", [text]), ("a character a delta", list(text))]
    ways += [(f"cut at {at}", [text[:at], text[at:]]) for at in cut_points(text)]
    return ways


# Totals over the run, for docs/serving.md's figures (printed by test_zz_figures with -s).
FIGURES = {"formats": 0, "texts": 0, "runs": 0, "failed": 0}


@pytest.mark.parametrize("slug", SLUGS)
def test_round_trip_texts_give_parses_message(slug, plugin_dir):
    cls = parser_class(slug, plugin_dir)
    failures = []
    found = cases(slug)
    if not found:
        pytest.skip("no round-trip text")
    FIGURES["formats"] += 1
    for case in found:
        FIGURES["texts"] += 1
        request = request_for(case)
        want = expected(slug, case)
        got = one_shot(cls, case, request)
        FIGURES["runs"] += 1
        if not same(got, want):
            failures.append((case.kind.name, "not streamed", got, want))
        for how, chunks in splits(case.text):
            FIGURES["runs"] += 1
            got = streamed(cls, case, request, chunks)
            if not same(got, want):
                failures.append((case.kind.name, how, got, want))
    FIGURES["failed"] += len(failures)
    assert not failures, failures[:5]


@functools.cache
def tool_parser_only(slug: str, tmp_dir: str):
    """The Parser class of a server given --tool-call-parser alone."""
    parser_class(slug, tmp_dir)  # imports the plugin
    return ParserManager.get_parser(tool_parser_name=f"chatfmt-{slug}", enable_auto_tools=True)


@pytest.mark.parametrize("slug", SLUGS)
def test_the_tool_parser_alone_streams_the_same_message(slug, plugin_dir):
    """Without the reasoning parser the tool parser reads the whole output, reasoning
    included (streamed; vLLM's non-streamed reply has no place for the reasoning)."""
    cls = tool_parser_only(slug, plugin_dir)
    failures = []
    if not cases(slug):
        pytest.skip("no round-trip text")
    for case in cases(slug):
        request = request_for(case)
        want = expected(slug, case)
        for how, chunks in splits(case.text)[:2]:
            got = streamed(cls, case, request, chunks)
            if not same(got, want):
                failures.append((case.kind.name, how, got, want))
        got = one_shot(cls, case, request)
        if not same(got, dict(want, reasoning=None)):
            failures.append((case.kind.name, "not streamed", got, want))
    assert not failures, failures[:5]


def unswitched_cases(slug: str) -> list:
    found = [rt.make_case(slug, kind) for kind in rt.UNSWITCHED_KINDS]
    return [case for case in found if case is not None]


@pytest.mark.parametrize("slug", SLUGS)
def test_a_request_without_chat_template_kwargs_reads_as_the_template_s_default(
    slug, plugin_dir
):
    """A request that gives no chat-template arguments, its prompt rendered with the
    switch undefined: the plugin reads as parse's default (the template's), streamed
    and whole; and where vLLM hands over the rendered prompt, the message is the
    one the template rendered (the round trip)."""
    cls = parser_class(slug, plugin_dir)
    found = unswitched_cases(slug)
    if not found:
        pytest.skip("no round-trip text")
    failures = []
    for case in found:
        request = request_for(case)
        assert request.chat_template_kwargs is None
        want = expected(slug, case)
        for how, chunks in splits(case.text)[:2]:
            got = streamed(cls, case, request, chunks)
            if not same(got, want):
                failures.append((case.kind.name, how, got, want))
        got = one_shot(cls, case, request)
        if not same(got, want):
            failures.append((case.kind.name, "not streamed", got, want))
        for how, got in (
            ("prompt, streamed", streamed(cls, case, request, list(case.text), case.prefix)),
            ("prompt, not streamed", one_shot(cls, case, request, case.prefix)),
        ):
            message = {
                "content": got["content"],
                "reasoning_content": got["reasoning"],
                "tool_calls": [
                    {"id": None, "type": "function", "function": {"name": n, "arguments": a}}
                    for n, a in got["calls"]
                ],
            }
            passed, why = rt.check(case, lambda *args, message=message, **kwargs: message)
            if not passed and not same(got, want):
                failures.append((case.kind.name, how, why))
    assert not failures, failures[:5]


def test_the_rendered_prompt_decides_over_the_default(plugin_dir):
    """Qwen3.5 thinks by default (its prompt opens <think>); a prompt rendered with
    thinking off closes the block. vLLM hands that prompt over: the plugin reads the
    answer as the answer, where the request's arguments (none) would leave the default,
    which reads it as reasoning."""
    slug = "qwen3_5_4b"
    cls = parser_class(slug, plugin_dir)
    spec = rt.load_spec(slug)
    template = rt.template_for(spec)
    if template is None:
        pytest.skip("no corpus")
    prompt = template.render(rt.history(spec), add_generation_prompt=True, enable_thinking=False)
    case = rt.Case(slug, rt.UNSWITCHED_KINDS[0], "It is 42.", "", prompt, {})
    request = request_for(case)
    assert rt.module(slug).parse(case.text)["reasoning_content"] == "It is 42."
    for got in (
        streamed(cls, case, request, list(case.text), prompt),
        one_shot(cls, case, request, prompt),
    ):
        assert (got["content"], got["reasoning"]) == ("It is 42.", None), got


def test_zz_figures():
    print("\nvLLM plugin figures:", json.dumps(FIGURES))


# --- adjust_request --------------------------------------------------------------------

CALL_SLUG = "qwen_qwen3_0_6b"
WEATHER = rt.TOOLS["get_weather"]


def _adjusted(plugin_dir, **fields):
    cls = parser_class(CALL_SLUG, plugin_dir)
    request = ChatCompletionRequest(messages=MESSAGES, model="m", tools=[WEATHER], **fields)
    parser = cls(None, request.tools, chat_template_kwargs={})
    return parser.adjust_request(request)


@pytest.mark.parametrize(
    "choice",
    ["required", {"type": "function", "function": {"name": "get_weather"}}],
    ids=["required", "named"],
)
def test_forced_choices_get_the_structural_tag(plugin_dir, choice):
    request = _adjusted(plugin_dir, tool_choice=choice)
    assert request.skip_special_tokens is False
    tag = json.loads(request.structured_outputs.structural_tag)
    want = rt.module(CALL_SLUG).structural_tag([WEATHER], tool_choice=choice)
    assert tag == want
    assert request._grammar_from_parser  # the tag covers the reasoning: from token one


def test_strict_tools_get_the_structural_tag(plugin_dir):
    strict = json.loads(json.dumps(WEATHER))
    strict["function"]["strict"] = True
    cls = parser_class(CALL_SLUG, plugin_dir)
    request = ChatCompletionRequest(
        messages=MESSAGES, model="m", tools=[strict], tool_choice="auto"
    )
    request = cls(None, request.tools, chat_template_kwargs={}).adjust_request(request)
    assert request.structured_outputs is not None
    assert json.loads(request.structured_outputs.structural_tag)["type"] == "structural_tag"


def test_auto_gets_no_tag_but_keeps_special_tokens(plugin_dir):
    request = _adjusted(plugin_dir, tool_choice="auto")
    assert request.skip_special_tokens is False
    assert request.structured_outputs is None


def test_the_tools_are_compiled_once_per_request(plugin_dir, monkeypatch):
    """One request's structural tag (a strict tool asks for one), its stream and its
    whole-output reading all take one compiled value: compile_tools runs once."""
    case = rt.make_case(CALL_SLUG, rt.TOOL_KINDS[0])
    assert case is not None
    strict = json.loads(json.dumps(case.tools))
    strict[0]["function"]["strict"] = True
    cls = parser_class(CALL_SLUG, plugin_dir)
    request = ChatCompletionRequest(
        messages=MESSAGES,
        model="m",
        tools=strict,
        tool_choice="auto",
        chat_template_kwargs=template_kwargs(case),
    )
    parser = cls(None, request.tools, chat_template_kwargs=template_kwargs(case))
    fmt = sys.modules[type(parser.tool_parser).__module__].fmt
    compiled: list = []
    compile_tools = fmt.compile_tools
    monkeypatch.setattr(
        fmt, "compile_tools", lambda tools: compiled.append(tools) or compile_tools(tools)
    )
    request = parser.adjust_request(request)
    assert request.structured_outputs is not None
    processor = ChatStreamProcessor(request, parser, enable_auto_tools=True, parser_cls=cls)
    for number, chunk in enumerate(case.text):
        last = number == len(case.text) - 1
        processor.step(chunk, [1], "stop" if last else None, [] if number == 0 else None)
    _, _, calls = parser.parse(case.text, request, enable_auto_tools=True)
    assert [call.name for call in calls or ()] == ["get_weather"]
    assert len(compiled) == 1


# --- a plugin imports nothing of the compiler ----------------------------------------

PLUGIN_IMPORTS = {"__future__", "json", "sys", "threading", "types", "uuid", "collections.abc"}
MODULE_IMPORTS = {"__future__", "ast", "copy", "json", "re", "typing", "warnings"}


def _imports(tree: ast.AST) -> set[str]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            found.add("." * node.level + (node.module or ""))
    return found


def _embedded(tree: ast.Module) -> str:
    for node in tree.body:
        targets = [getattr(target, "id", None) for target in getattr(node, "targets", ())]
        if isinstance(node, ast.Assign) and targets == ["MODULE_SOURCE"]:
            assert isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
            return node.value.value
    raise AssertionError("no MODULE_SOURCE")


def check_imports(text: str) -> None:
    tree = ast.parse(text)
    outside = {
        name for name in _imports(tree) - PLUGIN_IMPORTS if not name.startswith("vllm.")
    }
    assert not outside, sorted(outside)
    embedded = _embedded(tree)
    assert _imports(ast.parse(embedded)) <= MODULE_IMPORTS
    names = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    assert not names & {"__import__", "importlib", "eval"}


@pytest.mark.parametrize("slug", SLUGS)
def test_plugin_imports_nothing_of_the_compiler(slug):
    text = plugin_text(slug)
    check_imports(text)
    # the standalone module verbatim
    assert _embedded(ast.parse(text)) == standalone_text(fmt_of(slug))


@pytest.mark.parametrize(
    "statement", ["import compiler", "from compiler import model", "import os"]
)
def test_a_compiler_import_is_caught(statement):
    text = plugin_text(CALL_SLUG).replace("import json\n", f"import json\n{statement}\n", 1)
    with pytest.raises(AssertionError):
        check_imports(text)


def test_plugin_loads_where_the_compiler_cannot(tmp_path):
    path = tmp_path / "plugin.py"
    path.write_text(plugin_text(CALL_SLUG), encoding="utf-8")
    script = (
        "import sys\n"
        "for name in ('compiler', 'generated', 'tests'):\n"
        "    sys.modules[name] = None  # import compiler now raises\n"
        "from vllm.tool_parsers import ToolParserManager\n"
        f"ToolParserManager.import_tool_parser({str(path)!r})\n"
        "parser = ToolParserManager.get_tool_parser('chatfmt-" + CALL_SLUG + "')\n"
        "loaded = [m for m in sys.modules if m.split('.')[0] in ('compiler', 'generated')]\n"
        "assert all(sys.modules[m] is None for m in loaded), loaded\n"
        "print(parser.__name__)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
        cwd=str(tmp_path),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().endswith("FormatToolParser")
