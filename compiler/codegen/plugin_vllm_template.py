"""A vLLM tool-call and reasoning parser plugin for one chat format.

This file is the template ``compiler/codegen/plugin_vllm.py`` fills in: the lines
marked ``# filled in`` get the format's name, its reasoning markers and the text of
its generated parser module. As it stands it is ordinary Python (checked by ruff), so
the adapter below is read and linted like any other code; it imports the standard
library and vLLM, never the compiler.

How it reads: the generated module's ``StreamParser`` reads the whole output, and
its deltas become vLLM's. vLLM composes a reasoning parser (run until it says the
reasoning has ended) and a tool parser (run from there on); both classes here can
read a whole output alone. When vLLM makes the two together for one request (in
that order, in one call: ``Parser.__init__``), the tool parser pairs itself with the
reasoning parser made just before it: the reasoning parser then sends the reasoning
and, at the first delta that is not reasoning, hands its reader over to the tool
parser, which sends everything after. So one reader reads each output, however vLLM
cuts it. The thinking setting it reads with is the one whose prompt ends as the
rendered prompt does, where vLLM hands that over (``set_prompt_token_ids``), else
the request's (None where it gives none: the template's default).
"""

from __future__ import annotations

import json
import sys
import threading
import types
import uuid
from collections.abc import Sequence

from vllm.entrypoints.generate.base.protocol import (
    DeltaFunctionCall,
    DeltaMessage,
    DeltaToolCall,
    ExtractedToolCallInformation,
    FunctionCall,
    ToolCall,
)
from vllm.entrypoints.openai.chat_completion.protocol import (
    ChatCompletionNamedToolChoiceParam,
    ChatCompletionRequest,
)
from vllm.reasoning import ReasoningParser, ReasoningParserManager
from vllm.sampling_params import StructuredOutputsParams
from vllm.tool_parsers import ToolParser, ToolParserManager

NAME = "chatfmt"  # filled in: the name both parsers are registered under
REASONING_STARTS: tuple[str, ...] = ()  # filled in: the openers of the reasoning block
REASONING_END = ""  # filled in: its closer ("" where the format has no block)
MODULE_SOURCE = ""  # filled in: the parser as one standalone module, verbatim


def _load_format() -> types.ModuleType:
    """The generated module, executed into a module of its own (registered, since
    its classes name their module)."""
    name = f"{__name__}_format"
    loaded = sys.modules.get(name)
    if loaded is not None and getattr(loaded, "SOURCE", None) == MODULE_SOURCE:
        return loaded  # vLLM imports a plugin file once per flag that names it
    module = types.ModuleType(name, "the generated parser of " + NAME)
    sys.modules[name] = module
    exec(compile(MODULE_SOURCE, f"<{NAME}: generated parser>", "exec"), module.__dict__)
    module.SOURCE = MODULE_SOURCE  # type: ignore[attr-defined]
    return module


fmt = _load_format()

# The reasoning parser made last in this thread and not yet paired (see the top).
_unpaired = threading.local()


# How a request switches thinking (the spec's capabilities.thinking_switch): each
# variable the template reads with its values for thinking on and off, and what the
# template does where a request gives none; None: the template has no switch.
_SWITCH = fmt.SPEC["capabilities"].get("thinking_switch")
# How many of the prompt's last tokens are decoded to see how it ends.
_PROMPT_TAIL = 64


def _thinking(template_kwargs) -> bool | None:
    """The thinking setting the request rendered the prompt with: True or False where
    its chat-template arguments (the server's defaults merged in) give one of the
    template's switch variables a value that turns thinking on or off, whatever the
    variable's name and polarity; None where they give none (the parser then reads
    the output as the template's own default has it)."""
    given = template_kwargs or {}
    found = set()
    for name, values in (_SWITCH or {}).get("variables", {}).items():
        value = given.get(name)
        if value is None:
            continue
        for setting, key in ((True, "thinking_on"), (False, "thinking_off")):
            wanted = values.get(key)
            if key in values and (bool(value) if isinstance(wanted, bool) else value) == wanted:
                found.add(setting)
    return found.pop() if len(found) == 1 else None


def _from_prompt(prompt_end: str, asked: bool | None, tools: bool) -> bool | None:
    """The thinking setting whose prompt ends as the rendered one does (the reasoning
    block opened by it or not, the answer's opener written by it or not, as the spec
    records per setting): the request's own where it fits, else whichever does; the
    request's where none does. The prompt itself then decides where the output
    starts, whatever the request said and whatever the template's default."""
    if not REASONING_END:
        return asked
    reasoning, content = fmt.SPEC["reasoning"], fmt.SPEC["content"]
    end = prompt_end.rstrip()
    opener = (content.get("start") or "").strip()
    seen = (
        any(end.endswith(start.strip()) for start in REASONING_STARTS if start.strip()),
        bool(opener) and end.endswith(opener),
    )
    opened = (reasoning.get("opened_with_tools") if tools else None) or reasoning[
        "opened_by_prompt"
    ]
    content_opened = content.get("opened_by_prompt") or {}
    for setting in ([asked] if asked is not None else []) + [True, False]:
        key = "thinking_on" if setting else "thinking_off"
        if (bool(opened[key]), bool(content_opened.get(key))) == seen:
            return setting
    return asked


def _tool_dicts(tools) -> list | None:
    """vLLM's tool definitions as the OpenAI dicts the generated parser takes."""
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


def _call_id(given) -> str:
    """The call's id as the model wrote it, else a fresh one (strict clients need
    one on every call's first delta)."""
    return given if isinstance(given, str) and given else "call_" + uuid.uuid4().hex[:24]


class _Reader:
    """One ``StreamParser`` over one output; its deltas as one ``DeltaMessage``."""

    def __init__(self, tools, enable_thinking: bool | None) -> None:
        self.parser = fmt.StreamParser(tools=tools, enable_thinking=enable_thinking)
        self.ids: dict[int, str] = {}  # the id sent for each call
        self.done = False

    def feed(self, text: str) -> list[dict]:
        return self.parser.feed(text) if text and not self.done else []

    def finish(self) -> list[dict]:
        if self.done:
            return []
        self.done = True
        return self.parser.finish()

    def message(self, deltas: list[dict]) -> DeltaMessage | None:
        """The deltas joined into one message (None for nothing): text fields
        concatenated, each call's pieces joined in order. Pieces of a call the
        reader has abandoned are left out: it gets nothing more."""
        content: list[str] = []
        reasoning: list[str] = []
        calls: dict[int, DeltaToolCall] = {}
        abandoned = set(self.parser.abandoned)
        for delta in deltas:
            content.append(delta.get("content") or "")
            reasoning.append(delta.get("reasoning_content") or "")
            for part in delta.get("tool_calls") or ():
                index = part["index"]
                if index in abandoned:
                    continue
                function = part.get("function") or {}
                arguments = function.get("arguments") or ""
                call = calls.get(index)
                if call is None:
                    call = DeltaToolCall(index=index, function=DeltaFunctionCall(arguments=""))
                    calls[index] = call
                if "name" in function and index not in self.ids:
                    # The call's first delta: its id, type and name go with it.
                    self.ids[index] = _call_id(part.get("id"))
                    call.id = self.ids[index]
                    call.type = "function"
                    call.function.name = function["name"]
                call.function.arguments += arguments
        message = DeltaMessage(
            content="".join(content) or None,
            reasoning="".join(reasoning) or None,
            tool_calls=list(calls.values()),
        )
        if message.content is None and message.reasoning is None and not calls:
            return None
        return message


def _skip_no_special_tokens(request):
    """Markers are often special tokens: the text must keep them to be read."""
    if hasattr(request, "skip_special_tokens"):
        request.skip_special_tokens = False
    return request


def _forced(request) -> dict | str | None:
    """The tool_choice the structural tag must enforce, or None where the request
    needs no tag: "required", a named function, or any tool marked strict."""
    choice = request.tool_choice
    if isinstance(choice, ChatCompletionNamedToolChoiceParam):
        return {"type": "function", "function": {"name": choice.function.name}}
    if isinstance(choice, dict) and choice.get("type") == "function":
        return choice
    if choice == "required":
        return "required"
    strict = any(
        getattr(getattr(tool, "function", None), "strict", False) for tool in request.tools
    )
    return "auto" if strict and choice in (None, "auto") else None


@ReasoningParserManager.register_module(NAME)
class FormatReasoningParser(ReasoningParser):
    """Reasoning of the format, read by the generated parser."""

    # vLLM asks has_engine_confirmed_reasoning_end() rather than token ids whether
    # the reasoning has ended, and takes what finish_streaming() returns at the end.
    engine_based_streaming = True

    def __init__(self, tokenizer, *args, **kwargs) -> None:
        super().__init__(tokenizer, *args, **kwargs)
        self._template_kwargs = dict(kwargs.get("chat_template_kwargs") or {})
        self._partner: FormatToolParser | None = None
        self._tools = _RequestTools()
        self._reader: _Reader | None = None
        self._ended = False
        self._handed: list[dict] = []  # deltas read but left to the tool parser
        self._scanned = ""  # the tail of the output decoded so far (token checks)
        # How the rendered prompt ends (set_prompt_token_ids; None: not handed over).
        self._prompt_end: str | None = None
        _unpaired.parser = self

    @property
    def reasoning_start_str(self) -> str | None:
        return REASONING_STARTS[0] if REASONING_STARTS else None

    @property
    def reasoning_end_str(self) -> str | None:
        return REASONING_END or None

    def _request_tools(self) -> _RequestTools:
        """The request's tools: compiled once for both parsers where paired."""
        return self._partner.request_tools if self._partner is not None else self._tools

    def _partners_tools(self):
        if self._partner is None:
            return None
        return self._request_tools().of(self._partner.tools)

    def _start(self) -> _Reader:
        if self._reader is None:
            tools = self._partners_tools()
            self._reader = _Reader(tools, self.setting(self._template_kwargs, tools))
        return self._reader

    def setting(self, template_kwargs, tools) -> bool | None:
        """The thinking setting to read the output with: the request's (None where it
        gives none), or where vLLM handed over the rendered prompt, the setting whose
        prompt ends as that one does."""
        asked = _thinking(template_kwargs)
        if self._prompt_end is None:
            return asked
        return _from_prompt(self._prompt_end, asked, bool(tools))

    def set_prompt_token_ids(self, prompt_token_ids: Sequence[int]) -> None:
        # vLLM hands the rendered prompt over before it reads an output, streamed
        # or whole; its end says whether the output starts inside the block.
        self._prompt_end = self._decoded(list(prompt_token_ids)[-_PROMPT_TAIL:]) or None

    def adjust_initial_state_from_prompt(self, prompt_token_ids: Sequence[int]) -> None:
        if self._prompt_end is None:
            self.set_prompt_token_ids(prompt_token_ids)

    def adjust_request(self, request):
        return _skip_no_special_tokens(request)

    # -- token checks (structured outputs ask them with token ids) ---------------

    def _decoded(self, ids: Sequence[int]) -> str:
        if self.model_tokenizer is None or not ids:
            return ""
        try:
            return self.model_tokenizer.decode(list(ids), skip_special_tokens=False)
        except Exception:  # a tokenizer that cannot decode them says nothing
            return ""

    @staticmethod
    def _closed(text: str) -> bool:
        """Whether a reasoning block closes in ``text`` after its last opener."""
        if not REASONING_END:
            return True  # no block to wait for
        end = text.rfind(REASONING_END)
        return end >= 0 and all(text.rfind(start) < end for start in REASONING_STARTS)

    def is_reasoning_end(self, input_ids: Sequence[int]) -> bool:
        return self._closed(self._decoded(input_ids))

    def is_reasoning_end_streaming(self, input_ids, delta_ids) -> bool:
        # Only the new tokens are decoded, after the tail that could hold the start
        # of a marker: linear over the output, not quadratic.
        keep = max([len(REASONING_END), *map(len, REASONING_STARTS)]) - 1
        text = self._scanned + self._decoded(list(delta_ids))
        self._scanned = text[-keep:] if keep > 0 else ""
        return self._closed(text)

    def extract_content_ids(self, input_ids: list[int]) -> list[int]:
        return list(input_ids)

    # -- reading -------------------------------------------------------------------

    def extract_reasoning(self, model_output: str, request):
        tools = self._request_tools().of(getattr(request, "tools", None))
        # The kwargs vLLM made this parser with hold the server's defaults too.
        thinking = self.setting(
            self._template_kwargs or getattr(request, "chat_template_kwargs", None), tools
        )
        message = fmt.parse(model_output, tools=tools, enable_thinking=thinking)
        if self._partner is not None or message["tool_calls"]:
            # The tool parser reads the whole output again for content and calls;
            # with no tool parser of this format, nothing is dropped either.
            return message["reasoning_content"], model_output
        return message["reasoning_content"], message["content"]

    def extract_reasoning_streaming(
        self,
        previous_text: str,
        current_text: str,
        delta_text: str,
        previous_token_ids: Sequence[int],
        current_token_ids: Sequence[int],
        delta_token_ids: Sequence[int],
    ) -> DeltaMessage | None:
        reader = self._start()
        deltas = reader.feed(delta_text)
        if self._partner is not None and not self._ended:
            for at, delta in enumerate(deltas):
                if set(delta) - {"reasoning_content"}:
                    # The reasoning is over: the rest goes to the tool parser.
                    self._ended = True
                    self._handed = deltas[at:]
                    deltas = deltas[:at]
                    break
        return reader.message(deltas)

    def has_engine_confirmed_reasoning_end(self) -> bool:
        return self._ended

    def hand_over(self) -> tuple[_Reader, list[dict]] | None:
        """The reader and the deltas it read past the reasoning, once it has ended."""
        if not self._ended or self._reader is None:
            return None
        handed, self._handed = self._handed, []
        return self._reader, handed

    def finish_streaming(self) -> DeltaMessage | None:
        # vLLM calls this when the reasoning ends (the reader then goes on in the
        # tool parser) and at the end of an output it read to the end.
        if self._ended or self._reader is None:
            return None
        return self._reader.message(self._reader.finish())


@ToolParserManager.register_module(NAME)
class FormatToolParser(ToolParser):
    """Tool calls (and content, and reasoning where it reads alone) of the format."""

    # Named and required tool_choice are read as the format writes calls, under the
    # structural tag adjust_request sets; not as vLLM's JSON list.
    supports_required_and_named = False
    engine_based_streaming = True

    def __init__(self, tokenizer, tools=None) -> None:
        super().__init__(tokenizer, tools)
        self.request_tools = _RequestTools()
        self._reader: _Reader | None = None
        self._pending: list[dict] = []
        self._partner: FormatReasoningParser | None = None
        reasoning = getattr(_unpaired, "parser", None)
        if reasoning is not None and reasoning._partner is None:
            if reasoning.model_tokenizer is tokenizer:
                reasoning._partner = self
                self._partner = reasoning
        _unpaired.parser = None

    def _template_kwargs(self, request) -> dict:
        if self._partner is not None and self._partner._template_kwargs:
            return self._partner._template_kwargs  # with the server's defaults
        return getattr(request, "chat_template_kwargs", None) or {}

    def _setting(self, request) -> bool | None:
        """The thinking setting to read the output with (the reasoning parser's,
        which vLLM hands the rendered prompt, where there is one)."""
        kwargs, tools = self._template_kwargs(request), _tool_dicts(request.tools)
        if self._partner is not None:
            return self._partner.setting(kwargs, tools)
        return _thinking(kwargs)

    def adjust_request(self, request):
        request = _skip_no_special_tokens(request)
        if not isinstance(request, ChatCompletionRequest) or not request.tools:
            return request
        choice = _forced(request)
        if choice is None:
            return request
        try:
            tag = fmt.structural_tag(
                self.request_tools.of(request.tools),
                tool_choice=choice,
                parallel_tool_calls=request.parallel_tool_calls is not False,
                enable_thinking=_thinking(self._template_kwargs(request)),
            )
        except ValueError:
            return request  # a choice this format cannot force: vLLM says what is wrong
        request.structured_outputs = StructuredOutputsParams(structural_tag=json.dumps(tag))
        request.response_format = None
        # The tag covers the reasoning too: it applies from the first token.
        request._grammar_from_parser = True
        return request

    def extract_tool_calls(self, model_output: str, request) -> ExtractedToolCallInformation:
        message = fmt.parse(
            model_output,
            tools=self.request_tools.of(request.tools),
            enable_thinking=self._setting(request),
        )
        calls = []
        for call in message["tool_calls"]:
            function = call["function"]
            calls.append(
                ToolCall(
                    id=_call_id(call.get("id")),
                    function=FunctionCall(name=function["name"], arguments=function["arguments"]),
                )
            )
        return ExtractedToolCallInformation(
            tools_called=bool(calls), tool_calls=calls, content=message["content"]
        )

    def extract_tool_calls_streaming(
        self,
        previous_text: str,
        current_text: str,
        delta_text: str,
        previous_token_ids: Sequence[int],
        current_token_ids: Sequence[int],
        delta_token_ids: Sequence[int],
        request,
    ) -> DeltaMessage | None:
        if self._reader is None:
            handed = self._partner.hand_over() if self._partner is not None else None
            if handed is not None:
                self._reader, self._pending = handed
            else:  # reading alone from the output's start
                self._reader = _Reader(
                    self.request_tools.of(request.tools), self._setting(request)
                )
        deltas, self._pending = self._pending + self._reader.feed(delta_text), []
        return self._reader.message(deltas)

    def finish_streaming(self) -> DeltaMessage | None:
        if self._reader is None:
            return None
        return self._reader.message(self._pending + self._reader.finish())
