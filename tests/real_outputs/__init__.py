"""Real model outputs from vLLM's public tests, measured against the generated parsers.

The data lives in ``vllm/<parser>.json`` beside this file (see README.md for where it
comes from and its format). This module loads it, runs every case through the
generated module of every slug its file maps to, and sums the figures:

- ``parse(output, tools=..., enable_thinking=...)`` compared with vLLM's expected
  message (only the fields vLLM's test asserts: content and reasoning with the
  surrounding whitespace stripped, content ``None`` where vLLM expects none (``None``,
  or ``""`` joined from a stream) and reasoning ``None`` equal to ``""``; tool calls by name and
  by arguments read as JSON values; ids only where vLLM gives one and the template
  writes ids);
- the module's ``StreamParser`` over the output in chunks of 1 and of 7 characters,
  which must never raise and, where ``parse(output, strict=True)`` accepts the output,
  must merge (abandoned calls dropped) into exactly ``parse``'s message.

``python -m tests.real_outputs`` prints the table; ``tests/test_real_outputs.py``
holds the figures as floors.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import json
import os
from collections.abc import Iterator
from typing import Any

from tests.test_stream import merge

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "vllm")
CHUNK_SIZES = (1, 7)


@dataclasses.dataclass(frozen=True)
class Case:
    parser: str  # the vLLM parser the data file is named after
    file: str  # the vLLM test file the case comes from
    slug: str
    test: str
    output: str
    tools: list | None
    enable_thinking: bool | None
    expected: dict
    deviation: str | None  # None: written the way the slug's template writes it

    @property
    def name(self) -> str:
        return f"{self.parser}/{self.slug}/{self.test}"

    @property
    def in_format(self) -> bool:
        return self.deviation is None


def data_files() -> list[str]:
    return sorted(os.path.join(DATA, name) for name in os.listdir(DATA) if name.endswith(".json"))


def _deviation(raw, slug: str) -> str | None:
    """A case's deviation for one slug: one text for every slug, or a mapping from
    slug (``"*"`` for the others) to a text or null."""
    if isinstance(raw, dict):
        return raw.get(slug, raw.get("*"))
    return raw


def load() -> list[Case]:
    """Every case, once per slug of its file."""
    cases = []
    for path in data_files():
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
        for raw in data["cases"]:
            for slug in data["slugs"]:
                cases.append(
                    Case(
                        parser=data["parser"],
                        file=raw.get("file", data["file"]),
                        slug=slug,
                        test=raw["test"],
                        output=raw["output"],
                        tools=raw["tools"],
                        enable_thinking=raw["enable_thinking"],
                        expected=raw["expected"],
                        deviation=_deviation(raw["deviation"], slug),
                    )
                )
    return cases


@functools.lru_cache(maxsize=None)
def module(slug: str):
    return importlib.import_module(f"generated.{slug}")


def text(case: Case) -> str:
    """What the model wrote. vLLM's tool-parser tests (tests/tool_parsers/) give the
    text its server hands the tool parser: what follows the reasoning, which the
    reasoning parser has taken out. Where the slug's prompt leaves a reasoning block
    open, the model closes it first: an empty block, then that text."""
    if not case.file.startswith("tests/tool_parsers/"):
        return case.output
    reasoning = module(case.slug).SPEC["reasoning"]
    setting = "thinking_off" if case.enable_thinking is False else "thinking_on"
    opened = reasoning.get("opened_by_prompt") or {}
    if case.tools and reasoning.get("opened_with_tools"):
        opened = reasoning["opened_with_tools"]
    if opened.get(setting) and reasoning.get("end"):
        return reasoning["end"] + case.output
    return case.output


def options(case: Case) -> dict[str, Any]:
    opts: dict[str, Any] = {"tools": case.tools}
    if case.enable_thinking is not None:
        opts["enable_thinking"] = case.enable_thinking
    return opts


# ---------------------------------------------------------------------------
# comparing with vLLM's expected message


def _text(value) -> str:
    return (value or "").strip()


def _content_differs(ours, theirs) -> bool:
    """Content compared as a message holds it: None where there is none. vLLM's
    streaming tests expect the content deltas joined, so their "" is none too."""
    theirs = theirs or None
    if ours is None or theirs is None:
        return ours is not theirs
    return ours.strip() != theirs.strip()


def _writes_ids(slug: str) -> bool:
    tools = module(slug).SPEC.get("tools") or {}
    parts = (tools.get("call") or {}).get("parts") or []
    return any(part.get("hole") == "id" for part in parts) or bool(
        (tools.get("json") or {}).get("id")
    )


def differs(case: Case, message: dict) -> str | None:
    """How ``message`` differs from what vLLM expects (None when it does not)."""
    expected = case.expected
    if "content" in expected and _content_differs(message["content"], expected["content"]):
        return f"content {message['content']!r} != {expected['content']!r}"
    if "reasoning" in expected and _text(message["reasoning_content"]) != _text(
        expected["reasoning"]
    ):
        return f"reasoning {message['reasoning_content']!r} != {expected['reasoning']!r}"
    if "tool_calls" not in expected:
        return None
    ours = message["tool_calls"]
    want = expected["tool_calls"]
    if len(ours) != len(want):
        names = [call["function"]["name"] for call in ours]
        return f"{len(ours)} calls {names} != {len(want)} {[c['name'] for c in want]}"
    for index, (call, wanted) in enumerate(zip(ours, want, strict=True)):
        function = call["function"]
        if function["name"] != wanted["name"]:
            return f"call {index}: name {function['name']!r} != {wanted['name']!r}"
        if "arguments" not in wanted:  # vLLM's test checks the name only
            continue
        try:
            arguments = json.loads(function["arguments"])
        except ValueError:
            return f"call {index}: arguments not JSON: {function['arguments']!r}"
        if arguments != wanted["arguments"] or not _same_types(arguments, wanted["arguments"]):
            return f"call {index}: arguments {arguments!r} != {wanted['arguments']!r}"
        if "id" in wanted and _writes_ids(case.slug) and call["id"] != wanted["id"]:
            return f"call {index}: id {call['id']!r} != {wanted['id']!r}"
    return None


def _same_types(left, right) -> bool:
    """JSON equality that tells 1 from 1.0 from True (Python's == does not)."""
    if isinstance(left, bool) or isinstance(right, bool):
        return type(left) is type(right)
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(
            _same_types(left[key], right[key]) for key in left
        )
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(map(_same_types, left, right))
    if isinstance(left, (int, float)) and isinstance(right, (int, float)):
        return isinstance(left, int) == isinstance(right, int)
    return True


# ---------------------------------------------------------------------------
# the stream: merged as a client merges it, the stream contract checked on the way
# (tests/test_stream.py's merge: indices in order, abandoned calls never JSON)


def stream(case: Case, size: int) -> dict:
    """The merged message of the stream fed ``size`` characters at a time."""
    parser = module(case.slug).StreamParser(**options(case))
    deltas = []
    written = text(case)
    for at in range(0, len(written), size):
        deltas += parser.feed(written[at : at + size])
    deltas += parser.finish()
    return merge(deltas, parser.abandoned)


# ---------------------------------------------------------------------------
# one case, and the figures


@dataclasses.dataclass
class Result:
    case: Case
    passed: bool = False
    why: str | None = None  # how the parse differs from vLLM's expected message
    raised: str | None = None  # parse or the stream raised (never allowed)
    strict: bool = False  # parse(strict=True) accepted the output
    stream_differs: str | None = None  # on a strict-accepted output only


def run(case: Case) -> Result:
    result = Result(case)
    mod = module(case.slug)
    opts = options(case)
    try:
        message = mod.parse(text(case), **opts)
    except Exception as error:  # noqa: BLE001 - the figure records it
        result.raised = f"parse raised {type(error).__name__}: {error}"
        return result
    result.why = differs(case, message)
    result.passed = result.why is None
    try:
        mod.parse(text(case), strict=True, **opts)
        result.strict = True
    except ValueError:
        pass
    except Exception as error:  # noqa: BLE001
        result.raised = f"parse(strict=True) raised {type(error).__name__}: {error}"
    for size in CHUNK_SIZES:
        try:
            merged = stream(case, size)
        except Exception as error:  # noqa: BLE001
            result.raised = f"stream({size}) raised {type(error).__name__}: {error}"
            break
        if result.strict and merged != message and result.stream_differs is None:
            result.stream_differs = f"stream({size}) {merged!r} != parse {message!r}"
    return result


def results() -> list[Result]:
    return [run(case) for case in load()]


@dataclasses.dataclass
class Figure:
    passed: int = 0
    cases: int = 0
    in_format_passed: int = 0
    in_format_cases: int = 0

    def add(self, result: Result) -> None:
        self.cases += 1
        self.passed += result.passed
        if result.case.in_format:
            self.in_format_cases += 1
            self.in_format_passed += result.passed

    @staticmethod
    def percent(part: int, whole: int) -> float:
        return 100.0 * part / whole if whole else 100.0

    @property
    def all_percent(self) -> float:
        return self.percent(self.passed, self.cases)

    @property
    def in_format_percent(self) -> float:
        return self.percent(self.in_format_passed, self.in_format_cases)


def figures(done: list[Result]) -> tuple[dict[tuple[str, str], Figure], Figure]:
    rows: dict[tuple[str, str], Figure] = {}
    total = Figure()
    for result in done:
        rows.setdefault((result.case.parser, result.case.slug), Figure()).add(result)
        total.add(result)
    return rows, total


def table(done: list[Result]) -> Iterator[str]:
    """The per-format table in Markdown, then the totals."""
    rows, total = figures(done)
    yield "| vLLM parser | slug | passed / cases | in format: passed / cases |"
    yield "|---|---|---|---|"
    for (parser, slug), fig in sorted(rows.items()):
        yield (
            f"| {parser} | {slug} | {fig.passed} / {fig.cases} | "
            f"{fig.in_format_passed} / {fig.in_format_cases} |"
        )
    yield (
        f"| **total** | {len(rows)} formats | **{total.passed} / {total.cases}** "
        f"({total.all_percent:.1f}%) | **{total.in_format_passed} / "
        f"{total.in_format_cases}** ({total.in_format_percent:.1f}%) |"
    )
