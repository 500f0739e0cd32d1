"""The SGLang plugin (``python -m compiler plugin sglang``) inside SGLang's own parsers.

Opt-in (``make test-servers``, in ``.venv-servers`` with vLLM: see the Makefile);
skipped where SGLang is not installed. Each format's plugin file is written from its
spec, imported as SGLang's operator would (it registers itself under the slug), and
driven through SGLang's real ``ReasoningParser`` and ``FunctionCallParser`` with
SGLang's ``Tool`` definitions, chained as ``serving_chat`` chains them: the reasoning
parser first, its normal text handed to the tool parser (a whole output:
``has_tool_call`` then ``parse_non_stream``; a stream: ``parse_stream_chunk`` per
increment, and ``parse_stream_end`` with the last one).

For every format with tool calls or reasoning, every round-trip text
(tests/roundtrip.py) the template can express, read with the case's tools and the
``force_reasoning`` SGLang's own serving code works out for a request with the case's
thinking setting (none, for the cases rendered with the switch undefined), must give
what the generated module's ``parse`` reads from it with the setting the plugin can
know from that (content, reasoning, each call's name and arguments as JSON values):

- as one increment, and as the whole output (``parse_non_stream``);
- one character per increment;
- cut into two increments at every point (the texts run to ~1,200 characters);

and the first item of every call carries its name. A call the reader abandons gets
no item after that, and is left out of the merged message, as a client of the
server leaves it out. The module's ``parse`` is the oracle; the texts are the
template's.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests import roundtrip as rt
from tests.servers.build_plugin import plugin_text
from tests.test_roundtrip import KNOWN_FAILURES

fcp = pytest.importorskip("sglang.srt.function_call.function_call_parser")
reasoning_parser = pytest.importorskip("sglang.srt.parser.reasoning_parser")
protocol = pytest.importorskip("sglang.srt.entrypoints.openai.protocol")



@functools.cache
def _expected_cached(slug: str, kind: rt.Kind) -> dict:
    return _expected(rt.make_case(slug, kind))


@functools.cache
def _plugin_dir() -> Path:
    import tempfile

    return Path(tempfile.mkdtemp(prefix="sglang-plugins-"))


@functools.cache
def plugin(slug: str):
    """The imported plugin of ``slug`` (registered under the slug), or None where the
    format has neither calls nor reasoning."""
    try:
        text = plugin_text("sglang", Path(rt.SPECS) / f"{slug}.yaml")
    except ValueError:
        return None
    path = _plugin_dir() / f"{slug}_sglang.py"
    path.write_text(text, encoding="utf-8")
    name = f"sglang_plugin_{slug}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _has_calls(slug: str) -> bool:
    return slug in fcp.FunctionCallParser.ToolCallParserEnum


def _has_reasoning(slug: str) -> bool:
    return slug in reasoning_parser.ReasoningParser.DetectorMap


SLUGS = [slug for slug in rt.slugs() if plugin(slug) is not None]


def _cases(slug: str, kinds=rt.ALL_KINDS):
    for kind in kinds:
        case = rt.make_case(slug, kind)
        if case is not None:
            yield case


def _switch(slug: str) -> dict | None:
    """The corpus spec's thinking switch (None: none, or a name that is no corpus
    slug: the auto plugins' tests serve invented templates under names of their own)."""
    if not (Path(rt.SPECS) / f"{slug}.yaml").exists():
        return None
    return rt.load_spec(slug)["capabilities"].get("thinking_switch")


def _template_kwargs(case, spec: str) -> dict | None:
    """The request's chat-template arguments: the template's switch (``spec``'s) set
    as the case's setting says, under its own names and values (``enable_thinking``
    where it has no switch); None for a case rendered with the switch undefined."""
    thinking = case.kind.enable_thinking
    if thinking is None:
        return None
    switch = _switch(spec)
    if switch is None:
        return {"enable_thinking": thinking}
    key = "thinking_on" if thinking else "thinking_off"
    return {name: values[key] for name, values in switch["variables"].items() if key in values}


def _force_reasoning(case, spec: str) -> bool:
    """What SGLang 0.5.23 hands the reasoning detector for the case's request, for a
    template it keeps no reasoning config of its own for: its serving_chat reads the
    detector's ``reasoning_default`` (``_get_reasoning_from_request``; its module
    cannot be imported here, it needs the model runtime) — "always": on; "thinking" or
    "enable_thinking": on unless the request sets that false; "explicit_thinking" or
    "explicit_enable_thinking": off unless it sets it true."""
    mode = reasoning_parser.ReasoningParser(case.slug).detector.reasoning_default
    given = _template_kwargs(case, spec)
    if mode == "always":
        return True
    if mode in ("thinking", "enable_thinking"):
        return not given or given.get(mode) is not False
    if mode in ("explicit_thinking", "explicit_enable_thinking"):
        return given is not None and given.get(mode.removeprefix("explicit_")) is True
    return False


def _read_with(case) -> bool | None:
    """The thinking setting the plugin can know the case's request had
    (docs/serving.md): SGLang reads a request's setting under enable_thinking or
    thinking only; where the template's switch is one of those (pointing the usual
    way), a request that sets it reads as it says, except that where the template
    is off by default or undecided, false is read as the default (SGLang says false
    for a request that set nothing too). Otherwise: the template's default."""
    switch = _switch(case.slug)
    thinking = case.kind.enable_thinking
    if switch is None or thinking is None:
        return None
    readable = any(
        switch["variables"].get(name, {}).get("thinking_on") is True
        for name in ("enable_thinking", "thinking")
    )
    if not readable or (thinking is False and switch["default"] != "thinking_on"):
        return None
    return thinking


def _tools(case) -> list:
    return [protocol.Tool.model_validate(tool) for tool in case.tools or ()]


def _expected(case) -> dict:
    """What the generated module reads from the case's text, with the thinking
    setting the plugin can know (``_read_with``)."""
    message = rt.module(case.slug).parse(
        case.text, tools=case.tools, enable_thinking=_read_with(case)
    )
    return {
        "content": message["content"] or "",  # SGLang's normal_text: "" where there is none
        "reasoning": message["reasoning_content"] or "",
        "calls": [
            (call["function"]["name"], json.loads(call["function"]["arguments"]))
            for call in message["tool_calls"]
        ],
    }


def _same(got: dict, want: dict) -> bool:
    return (
        got["content"] == want["content"]
        and got["reasoning"] == want["reasoning"]
        and len(got["calls"]) == len(want["calls"])
        and all(
            g[0] == w[0] and rt.json_equal(g[1], w[1])
            for g, w in zip(got["calls"], want["calls"], strict=True)
        )
    )


class Server:
    """One choice of one request, read as SGLang's serving_chat reads it."""

    def __init__(self, case, *, tool_parser: bool = True, spec: str | None = None) -> None:
        """``spec``: the slug of the spec the request's template is (the case's slug,
        unless the detectors are registered under another name)."""
        slug = case.slug
        self.tools = _tools(case)
        self.tool_parser = tool_parser and _has_calls(slug)
        self.reasoning = None
        if _has_reasoning(slug):
            self.reasoning = reasoning_parser.ReasoningParser(
                slug,
                stream_reasoning=True,
                force_reasoning=_force_reasoning(case, spec or slug),
                tool_call_parser_active=self.tool_parser,
            )
        self.calls = fcp.FunctionCallParser(self.tools, slug) if self.tool_parser else None

        self.abandoned: set[int] = set()  # the calls abandoned by the last increment

    def _reader(self):
        """The generated module's StreamParser inside the tool detector, once made."""
        return getattr(self.calls.detector, "_reader", None) if self.calls else None

    def whole(self, text: str) -> dict:
        reasoning = ""
        if self.reasoning is not None:
            found, text = self.reasoning.parse_non_stream(text)
            reasoning = found or ""
        calls = []
        if self.calls is not None and self.calls.has_tool_call(text):
            text, items = self.calls.parse_non_stream(text)
            for item in items:
                calls.append((item.name, json.loads(item.parameters)))
        return {"content": text, "reasoning": reasoning, "calls": calls}

    def stream(self, pieces: list[str]) -> dict:
        content, reasoning = [], []
        calls: dict[int, list] = {}
        for number, piece in enumerate(pieces):
            last = number == len(pieces) - 1
            normal = piece
            if self.reasoning is not None:
                found, normal = self.reasoning.parse_stream_chunk(piece)
                reasoning.append(found or "")
                if last:
                    found, more = self.reasoning.parse_stream_end()
                    reasoning.append(found or "")
                    normal = (normal or "") + (more or "")
            if self.calls is None:
                content.append(normal or "")
                continue
            text, items = self.calls.parse_stream_chunk(normal or "")
            content.append(text)
            if last:
                text, more = self.calls.parse_stream_end()
                content.append(text)
                items = list(items) + list(more)
            for item in items:
                assert item.tool_index not in self.abandoned, "an item after abandonment"
                if item.tool_index not in calls:
                    assert item.name, f"call {item.tool_index}: its first item has no name"
                    calls[item.tool_index] = [item.name, ""]
                else:
                    assert not item.name, f"call {item.tool_index}: named twice"
                calls[item.tool_index][1] += item.parameters
            self.abandoned = set(self._reader().abandoned) if self._reader() else set()
        # The items of an abandoned call stopped (checked above); the client drops it.
        kept = [calls[index] for index in sorted(calls) if index not in self.abandoned]
        return {
            "content": "".join(content),
            "reasoning": "".join(reasoning),
            "calls": [(name, json.loads(arguments)) for name, arguments in kept],
        }


def _cut_points(text: str) -> list[int]:
    return list(range(len(text) + 1))


def _check(case, got: dict, how: str, failures: list) -> None:
    want = _expected_cached(case.slug, case.kind)
    if not _same(got, want):
        failures.append((case.kind.name, how, got, want))


@pytest.mark.parametrize("slug", SLUGS)
def test_one_increment_and_whole_output(slug):
    failures: list = []
    checked = 0
    for case in _cases(slug):
        checked += 1
        _check(case, Server(case).whole(case.text), "whole", failures)
        _check(case, Server(case).stream([case.text]), "one increment", failures)
    if not checked:
        pytest.skip("no round-trip text")
    assert not failures, failures[:3]


@pytest.mark.parametrize("slug", SLUGS)
def test_one_character_per_increment(slug):
    failures: list = []
    for case in _cases(slug):
        _check(case, Server(case).stream(list(case.text)), "by character", failures)
    assert not failures, failures[:3]


@pytest.mark.parametrize("slug", SLUGS)
def test_two_increments_at_every_point(slug):
    failures: list = []
    for case in _cases(slug):
        for cut in _cut_points(case.text):
            pieces = [case.text[:cut], case.text[cut:]]
            _check(case, Server(case).stream(pieces), f"cut at {cut}", failures)
    assert not failures, failures[:3]


@pytest.mark.parametrize("slug", SLUGS)
def test_a_request_without_chat_template_kwargs_reads_as_the_template_s_default(slug):
    """A request that gives no chat-template arguments, its prompt rendered with the
    switch undefined: SGLang's force_reasoning for it, read back by the plugin, gives
    parse's default reading (the template's), whole, as one increment and one
    character per increment; and that reading is the message the template rendered."""
    failures: list = []
    checked = 0
    for case in _cases(slug, rt.UNSWITCHED_KINDS):
        checked += 1
        _check(case, Server(case).whole(case.text), "whole", failures)
        _check(case, Server(case).stream([case.text]), "one increment", failures)
        _check(case, Server(case).stream(list(case.text)), "by character", failures)
        if not rt.check(case)[0] and (slug, case.kind.name) not in KNOWN_FAILURES:
            failures.append((case.kind.name, "the round trip"))
    if not checked:
        pytest.skip("no round-trip text")
    assert not failures, failures[:3]


@pytest.mark.parametrize("slug", [s for s in SLUGS if _has_reasoning(s)])
def test_reasoning_parser_alone_sends_the_content(slug):
    """Configured without the tool parser (or a request whose tools are off), the
    reasoning detector sends content itself: every text without calls gives
    parse's content and reasoning, whole and streamed."""
    failures: list = []
    for case in _cases(slug):
        if case.kind.calls:
            continue
        whole = Server(case, tool_parser=False).whole(case.text)
        _check(case, whole, "whole", failures)
        streamed = Server(case, tool_parser=False).stream(list(case.text))
        _check(case, streamed, "by character", failures)
    assert not failures, failures[:3]


@pytest.mark.parametrize("slug", [s for s in SLUGS if _has_calls(s)])
def test_an_abandoned_call_gets_no_more_items(slug):
    """A call cut off in its arguments and followed by prose, then a real call (as
    tests/test_stream.py builds it): streamed a character at a time, the first call
    is sent in part, then abandoned (in 40 of the 41 formats this applies to); no
    item of it follows, and the message without it is parse's, as the whole output
    read at once is."""
    case = rt.make_case(slug, rt.TOOL_KINDS[0])
    module = rt.module(slug)
    trigger = module.TRIGGERS[0] if module.TRIGGERS else {}
    start = case.text.find(trigger["value"]) if case and trigger.get("type") == 1 else -1
    if case is None or start < 0 or "Tokyo" not in case.text[start:]:
        pytest.skip("no literal trigger before the call's arguments")
    broken = case.text[: case.text.index("Tokyo", start) + 3] + " - no, that was wrong.\n"
    text = case.text[:start] + broken[start:] + case.text[start:]
    bent = dataclasses.replace(case, text=text)
    want = _expected(bent)
    assert len(want["calls"]) == 1, "parse reads the real call only"
    assert _same(Server(bent).whole(text), want)
    server = Server(bent)
    assert _same(server.stream(list(text)), want)
    assert server.abandoned <= {0}


def test_registered_where_sglang_takes_parser_names():
    from sglang.srt import (  # type: ignore[import-not-found, import-untyped, unused-ignore]
        server_args,
    )

    slug = next(s for s in SLUGS if _has_calls(s) and _has_reasoning(s))
    assert slug in server_args._tool_call_parser_choices()
    assert slug in server_args._reasoning_parser_choices()


@pytest.mark.parametrize("choice", ["required", {"name": "get_time"}])
def test_structural_tag_is_the_modules(choice):
    slug = "qwen_qwen3_0_6b"
    tools = [rt.TOOLS["get_weather"], rt.TOOLS["get_time"]]
    plugin(slug)
    parser = fcp.FunctionCallParser([protocol.Tool.model_validate(tool) for tool in tools], slug)
    tool_choice = protocol.ToolChoice(function=choice) if isinstance(choice, dict) else choice
    kind, tag = parser.get_structure_constraint(tool_choice, thinking_mode=False)
    assert kind == "structural_tag"
    wanted = {"type": "function", "function": choice} if isinstance(choice, dict) else choice
    assert tag.model_dump(by_alias=True) == rt.module(slug).structural_tag(
        tools, tool_choice=wanted, enable_thinking=False
    )


def test_the_tools_are_compiled_once_per_request(monkeypatch):
    """One request's stream, whole-output reading and structural tag all take one
    compiled value: compile_tools runs once."""
    slug = "qwen_qwen3_0_6b"
    case = rt.make_case(slug, rt.TOOL_KINDS[0])
    assert case is not None
    fmt = plugin(slug).fmt
    compiled: list = []
    compile_tools = fmt.compile_tools
    monkeypatch.setattr(
        fmt, "compile_tools", lambda tools: compiled.append(tools) or compile_tools(tools)
    )
    server = Server(case)
    assert _same(server.stream(list(case.text)), _expected(case))
    assert _same(server.whole(case.text), _expected(case))
    kind, _ = server.calls.get_structure_constraint("required", thinking_mode=False)
    assert kind == "structural_tag"
    assert len(compiled) == 1


def _imports(source: str) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


@pytest.mark.parametrize("slug", SLUGS)
def test_plugin_imports_nothing_of_the_compiler(slug):
    module = plugin(slug)
    source = Path(module.__file__).read_text(encoding="utf-8")
    assert _imports(source) <= {"__future__", "json", "sys", "types", "typing", "sglang"}
    assert _imports(module.MODULE_SOURCE) <= set(sys.stdlib_module_names)


def test_plugin_runs_without_the_compiler(tmp_path):
    """Imported in a fresh interpreter that cannot import the compiler, the plugin
    registers and reads."""
    slug = "qwen_qwen3_0_6b"
    path = tmp_path / "plugin.py"
    path.write_text(plugin_text("sglang", Path(rt.SPECS) / f"{slug}.yaml"), encoding="utf-8")
    script = f"""
import importlib.abc, sys
class NoCompiler(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in ("compiler", "generated", "tests"):
            raise ImportError("the plugin imported " + name)
sys.meta_path.insert(0, NoCompiler())
import runpy
runpy.run_path({str(path)!r}, run_name="plugin")
from sglang.srt.function_call.function_call_parser import FunctionCallParser
from sglang.srt.parser.reasoning_parser import ReasoningParser
r = ReasoningParser({slug!r}, force_reasoning=True, tool_call_parser_active=True)
reasoning, normal = r.parse_non_stream("<think>hm</think>Hi")
text, calls = FunctionCallParser([], {slug!r}).parse_non_stream(normal)
print(reasoning, text, calls)
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["hm", "Hi", "[]"]


def test_plugin_file_is_sglangs_command_line(tmp_path):
    """Run as a script, the plugin registers and hands its arguments to SGLang's own
    command line (``serve`` needs a model and a GPU; ``version`` shows the hand-over)."""
    path = tmp_path / "plugin.py"
    path.write_text(plugin_text("sglang", Path(rt.SPECS) / "qwen3_coder.yaml"), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(path), "version"], capture_output=True, text=True, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "sglang version: 0.5.23" in done.stdout
