"""An SGLang tool-call detector and reasoning detector for one chat format.

This file is the template ``compiler/codegen/plugin_sglang.py`` fills in: the lines
marked ``# filled in`` get the name, the format's reasoning markers, whether it has
calls, and the text of its generated parser module. As it stands it is ordinary
Python (ruff reads it like any other code); it imports the standard library and
SGLang, never the compiler.

How it reads: SGLang runs a request's output through the reasoning detector first
and hands the text it calls normal on to the tool detector. Both detectors here read
the output with the generated module (``parse`` for a whole output, ``StreamParser``
for increments). The reasoning detector sends the reasoning; when a tool detector
follows it (SGLang says so with ``tool_call_parser_active``), it passes the output on
unchanged, behind one private-use character that says the reasoning was sent and
which thinking setting the prompt had; the tool detector reads the output again from
its start with the request's tools and sends the content and the calls. Without that
character (no reasoning detector ran: ``separate_reasoning`` off, or none
configured) the tool detector sends the reasoning as content. Without a tool
detector after it, the reasoning detector sends the content itself.

A call's first item carries its name and the call's index in the output (SGLang's
``tool_index`` in a stream); its arguments follow as they are read. A call the
reader abandons (it proves malformed) gets no further items, and its text comes
back as content, as ``parse`` reads it.

Registration: SGLang 0.5.23 takes parsers from two tables,
``FunctionCallParser.ToolCallParserEnum`` and ``ReasoningParser.DetectorMap``, which
``--tool-call-parser`` and ``--reasoning-parser`` check their names against.
``register()`` adds both detectors under NAME; it must run in every SGLang process
(the scheduler makes a reasoning parser too), before the arguments are parsed. Run
this file as the launcher (``python THIS_FILE serve ARGS``): registration happens at
import, and the processes SGLang spawns import the launcher again, so they register
too. A package may instead name ``register`` as an entry point in the
``sglang.srt.plugins`` group, which SGLang loads in every process.
"""

from __future__ import annotations

import json
import sys
import types
from typing import Any

from sglang.srt.function_call.base_format_detector import (  # type: ignore[import-not-found, import-untyped, unused-ignore]
    BaseFormatDetector,
)
from sglang.srt.function_call.core_types import (  # type: ignore[import-not-found, import-untyped, unused-ignore]
    StreamingParseResult,
    StructureInfo,
    ToolCallItem,
)
from sglang.srt.parser.reasoning_parser import (  # type: ignore[import-not-found, import-untyped, unused-ignore]
    BaseReasoningFormatDetector,
)
from sglang.srt.parser.reasoning_parser import (  # type: ignore[import-not-found, import-untyped, unused-ignore]
    StreamingParseResult as ReasoningResult,
)

NAME = "chatfmt"  # filled in: the name both detectors are registered under
REASONING_START = ""  # filled in: the reasoning block's opener ("" where none)
REASONING_END = ""  # filled in: its closer ("" where the format has no block)
HAS_CALLS = False  # filled in: whether the format writes tool calls
MODULE_SOURCE = ""  # filled in: the parser as one standalone module, verbatim

# What the reasoning detector puts before the output it hands on: the reasoning is
# sent, and the thinking setting it read with: on, off, or the template's default
# (None). Private-use characters: no
# tokenizer writes them in a model's output, and nothing reads them but the tool
# detector, which takes them off.
HANDED_ON = {True: "\ue0f1", False: "\ue0f0", None: "\ue0f2"}
# Between reasoning and content where both go to the client as content (no
# reasoning detector ran): the two stay apart, as the block's markers kept them.
UNSEPARATED = "\n\n"


def _load_format() -> types.ModuleType:
    """The generated module, executed into a module of its own (registered under a
    name of its own, since its classes name their module)."""
    name = f"{__name__}_format"
    loaded = sys.modules.get(name)
    if loaded is not None and getattr(loaded, "SOURCE", None) == MODULE_SOURCE:
        return loaded
    module = types.ModuleType(name, "the generated parser of " + NAME)
    sys.modules[name] = module
    exec(compile(MODULE_SOURCE, f"<{NAME}: generated parser>", "exec"), module.__dict__)
    module.SOURCE = MODULE_SOURCE  # type: ignore[attr-defined]
    return module


fmt = _load_format()


def _tool_dicts(tools) -> list | None:
    """SGLang's tool definitions (pydantic) as the OpenAI dicts the parser takes."""
    found = []
    for tool in tools or ():
        if hasattr(tool, "model_dump"):
            tool = tool.model_dump(exclude_none=True)
        if isinstance(tool, dict):
            found.append(tool)
    return found or None


class _RequestTools:
    """A request's tool definitions, compiled once (``compile_tools``) for every
    parse, stream and structural tag made for it: asked again for the same
    definitions (the same list, or one equal to it), the same compiled value.
    Definitions the module refuses to compile are passed as they are: the output is
    read all the same, typed by nothing they cannot type."""

    def __init__(self) -> None:
        self._given: object = None  # the tools last asked for, as the server gave them
        self._found: list | None = None  # and as dicts
        self._compiled: object = None

    def of(self, tools):
        if tools is None:
            return None
        if tools is not self._given:
            found = _tool_dicts(tools)
            if found != self._found:
                try:
                    self._compiled = fmt.compile_tools(found) if found else None
                except (TypeError, ValueError):
                    self._compiled = found
                self._found = found
            self._given = tools
        return self._compiled


def _joined(deltas: list[dict], field: str) -> str:
    return "".join(delta.get(field) or "" for delta in deltas)


class _Tag:
    """A structural tag as SGLang passes one on (it calls ``model_dump``)."""

    def __init__(self, tag: dict) -> None:
        self.tag = tag

    def model_dump(self, **_options) -> dict:
        return self.tag


# How a request switches thinking (the spec's capabilities.thinking_switch).
_SWITCH = fmt.SPEC["capabilities"].get("thinking_switch")


def _sglang_mode() -> str | None:
    """The reasoning_default that makes SGLang's force_reasoning say what the request
    set: SGLang reads a request's thinking setting only under enable_thinking or
    thinking, on unless set false ("enable_thinking", "thinking") or off unless set
    true ("explicit_..."). None where the template switches thinking under another
    name or the other way round (SGLang cannot read that request)."""
    if _SWITCH is None:
        return None
    for name in ("enable_thinking", "thinking"):
        values = _SWITCH["variables"].get(name)
        if values is not None and values.get("thinking_on") is True:
            on_by_default = _SWITCH["default"] == "thinking_on"
            return name if on_by_default else "explicit_" + name
    return None


SGLANG_MODE = _sglang_mode()


def _setting(force_reasoning: bool | None) -> bool | None:
    """The thinking setting to read the output with, from what SGLang hands over:
    force_reasoning, which it works out from the request (with SGLANG_MODE) or from
    its own reading of the template. True: on. False: off where the mode is on unless
    set false; where it is off unless set true, false also stands for a request
    that set nothing, which the template's default reads (None). None, or a
    template SGLang cannot read a request of: the template's default."""
    if force_reasoning is None or SGLANG_MODE is None:
        return None
    if force_reasoning:
        return True
    return False if not SGLANG_MODE.startswith("explicit_") else None


class FormatReasoningDetector(BaseReasoningFormatDetector):
    """The format's reasoning, read by the generated parser."""

    def __init__(
        self,
        stream_reasoning: bool = True,
        force_reasoning: bool | None = None,
        continue_final_message: bool = False,
        previous_content: str = "",
        force_nonempty_content: bool = False,
        tool_call_parser_active: bool = False,
    ) -> None:
        super().__init__(
            REASONING_START,
            REASONING_END,
            force_reasoning=bool(force_reasoning),
            stream_reasoning=stream_reasoning,
            # How SGLang reads a request's thinking setting where it does not know
            # the template: as the template's own switch and default have it.
            reasoning_default=SGLANG_MODE or "enable_thinking",
            force_nonempty_content=force_nonempty_content,
        )
        # SGLang hands over no prompt and no request, only force_reasoning.
        self.enable_thinking = _setting(force_reasoning)
        self.hands_on = tool_call_parser_active
        self._reader = fmt.StreamParser(enable_thinking=self.enable_thinking)
        self._marked = False  # whether the handed-on text has its first character
        self._held_reasoning = ""  # stream_reasoning=False: sent once it ends
        self._reasoning_ended = False

    def get_think_end_token_ids(self, tokenizer) -> list[int]:
        # The scheduler gates grammars on these; a format without a closer has none.
        return tokenizer.encode(REASONING_END, add_special_tokens=False) if REASONING_END else []

    def _hand_on(self, text: str) -> str:
        if not text or self._marked:
            return text
        self._marked = True
        return HANDED_ON[self.enable_thinking] + text

    def _result(self, deltas: list[dict], raw: str, final: bool) -> ReasoningResult:
        reasoning = _joined(deltas, "reasoning_content")
        if any("reasoning_content" not in delta for delta in deltas):
            self._reasoning_ended = True
        if not self.stream_reasoning:
            self._held_reasoning += reasoning
            reasoning = ""
            if self._reasoning_ended or final:
                reasoning, self._held_reasoning = self._held_reasoning, ""
        # Handed on, the text is the output as written; sent to the client, the
        # content. There SGLang runs no tool parser for the request, and a call the
        # model writes anyway is not sent (a delta holds no place for its text).
        normal = self._hand_on(raw) if self.hands_on else _joined(deltas, "content")
        return ReasoningResult(normal_text=normal, reasoning_text=reasoning)

    def detect_and_parse(self, text: str) -> ReasoningResult:
        message = fmt.parse(text, enable_thinking=self.enable_thinking)
        reasoning = message["reasoning_content"] or ""
        normal = self._hand_on(text) if self.hands_on else message["content"] or ""
        if self._force_nonempty_content and not normal:
            normal, reasoning = reasoning, ""
        return ReasoningResult(normal_text=normal, reasoning_text=reasoning)

    def parse_streaming_increment(self, new_text: str) -> ReasoningResult:
        deltas = self._reader.feed(new_text) if new_text else []
        return self._result(deltas, new_text, final=False)

    def finish(self) -> ReasoningResult:
        return self._result(self._reader.finish(), "", final=True)


class FormatToolDetector(BaseFormatDetector):
    """The format's tool calls (and content), read by the generated parser."""

    def __init__(self) -> None:
        super().__init__()
        self._reader: Any = None  # made with the first text, when the tools are known
        self._tools = _RequestTools()
        self._separated = False  # whether a reasoning detector sent the reasoning
        self._enable_thinking: bool | None = None
        self._named: set[int] = set()  # the calls whose name was sent
        self._unseparated = False  # reasoning sent as content, no content after it yet

    @staticmethod
    def _taken_apart(text: str) -> tuple[str, bool, bool | None]:
        """The output without the reasoning detector's mark, whether it had one, and
        the thinking setting the mark gives (None: the template's default; also
        where no mark says)."""
        for thinking, mark in HANDED_ON.items():
            if text.startswith(mark):
                return text[len(mark) :], True, thinking
        return text, False, None

    def has_tool_call(self, text: str) -> bool:
        # SGLang reads a whole output with detect_and_parse only where this holds,
        # and otherwise returns the text as it is: so it holds wherever the module
        # reads the text otherwise than as plain content.
        text, marked, _ = self._taken_apart(text)
        if marked:
            return True
        message = fmt.parse(text)
        return bool(message["tool_calls"] or message["reasoning_content"]) or (
            (message["content"] or "") != text
        )

    def detect_and_parse(self, text: str, tools) -> StreamingParseResult:
        text, marked, thinking = self._taken_apart(text)
        message = fmt.parse(text, tools=self._tools.of(tools), enable_thinking=thinking)
        content = message["content"] or ""  # SGLang's normal_text is a str
        if not marked and message["reasoning_content"]:
            # Nobody sent the reasoning: it stays in what the client reads.
            content = message["reasoning_content"] + (UNSEPARATED + content if content else "")
        calls = [
            ToolCallItem(
                tool_index=index,
                name=call["function"]["name"],
                parameters=call["function"]["arguments"],
            )
            for index, call in enumerate(message["tool_calls"])
        ]
        return StreamingParseResult(normal_text=content, calls=calls)

    def _items(self, deltas: list[dict]) -> StreamingParseResult:
        normal = []
        calls: list[ToolCallItem] = []
        abandoned = set(self._reader.abandoned)
        for delta in deltas:
            if not self._separated and delta.get("reasoning_content"):
                normal.append(delta["reasoning_content"])
                self._unseparated = True
            if delta.get("content"):
                if self._unseparated:  # the reasoning before it, kept as content
                    normal.append(UNSEPARATED)
                    self._unseparated = False
                normal.append(delta["content"])
            for part in delta.get("tool_calls") or ():
                index = part["index"]
                if index in abandoned:
                    continue  # it proved malformed: nothing more is sent for it
                function = part.get("function") or {}
                name = function.get("name") if index not in self._named else None
                if name is not None:
                    self._named.add(index)
                arguments = function.get("arguments") or ""
                last = calls[-1] if calls else None
                if last is not None and last.tool_index == index and name is None:
                    last.parameters += arguments
                else:
                    calls.append(ToolCallItem(tool_index=index, name=name, parameters=arguments))
        return StreamingParseResult(normal_text="".join(normal), calls=calls)

    def parse_streaming_increment(self, new_text: str, tools) -> StreamingParseResult:
        if self._reader is None:
            if not new_text:
                return StreamingParseResult()
            new_text, self._separated, self._enable_thinking = self._taken_apart(new_text)
            self._reader = fmt.StreamParser(
                tools=self._tools.of(tools), enable_thinking=self._enable_thinking
            )
        return self._items(self._reader.feed(new_text) if new_text else [])

    def finish(self, tools) -> StreamingParseResult:
        if self._reader is None:
            return StreamingParseResult()
        return self._items(self._reader.finish())

    @classmethod
    def parses_without_tools(cls) -> bool:
        # parse reads calls with or without tools; and this keeps SGLang handing
        # the output on to this detector, which sends the content.
        return True

    def supports_structural_tag(self) -> bool:
        return HAS_CALLS

    def get_structural_tag(
        self, tools=None, tool_choice="auto", thinking_mode=False, parallel_tool_calls=True
    ):
        """The module's structural tag for the request (SGLang asks for one where
        tool_choice is "required" or names a function, or a tool is strict).
        ``thinking_mode`` is off where SGLang's reasoning grammar owns the reasoning."""
        if not HAS_CALLS:
            return None
        choice = tool_choice
        if hasattr(choice, "model_dump"):
            choice = choice.model_dump(exclude_none=True)
        if isinstance(choice, dict) and "type" not in choice:
            choice = {"type": "function", **choice}
        tag = fmt.structural_tag(
            self._tools.of(tools) or [],
            tool_choice=choice,
            parallel_tool_calls=parallel_tool_calls,
            enable_thinking=thinking_mode,
        )
        return _Tag(json.loads(json.dumps(tag)))

    def structure_info(self):
        def info(name: str) -> StructureInfo:
            # SGLang's older tag puts a JSON schema between a begin and an end; the
            # format's own tag (get_structural_tag) says more, and SGLang asks for
            # this only where that one is refused.
            raise NotImplementedError(
                f"{NAME}: the format's structural tag comes from get_structural_tag"
            )

        return info


def register(name: str = NAME) -> None:
    """Add both detectors to SGLang's tables under ``name``, so that
    ``--tool-call-parser name`` and ``--reasoning-parser name`` take them."""
    from sglang.srt.function_call.function_call_parser import (  # type: ignore[import-not-found, import-untyped, unused-ignore]
        FunctionCallParser,
    )
    from sglang.srt.parser.reasoning_parser import (  # type: ignore[import-not-found, import-untyped, unused-ignore]
        ReasoningParser,
    )

    if HAS_CALLS:
        FunctionCallParser.ToolCallParserEnum[name] = FormatToolDetector
    if REASONING_END:
        ReasoningParser.DetectorMap[name] = FormatReasoningDetector


register()

if __name__ == "__main__":
    # The launcher: `python THIS_FILE serve --model-path MODEL --tool-call-parser
    # NAME --reasoning-parser NAME ...` is `sglang serve ...` with these registered.
    from sglang.cli.main import main  # type: ignore[import-not-found, import-untyped, unused-ignore]

    sys.exit(main())
