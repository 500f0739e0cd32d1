"""Reading a decoded output as a server would: token by token.

- ``pieces``: the text of each output token as the tokenizers library's incremental
  decoder gives it after the prompt (``DecodeStream``, what vLLM's engine uses for a
  fast tokenizer): a piece may hold part of a marker, a whole special token, or
  nothing (a character whose bytes span tokens arrives with its last token).
- ``stream_vs_parse``: the pieces fed one by one to ``StreamParser``; the merged
  deltas (the calls it abandoned left out) must be ``parse`` of the whole text.
- ``VllmPath``: the format's vLLM plugin through vLLM's own classes, fed as the
  chat endpoint feeds it: vLLM's engine detokenizer turns each token id into its
  delta text, and ``ChatStreamProcessor.step`` gets that text with the token id and
  the prompt's ids; then ``Parser.parse`` reads the whole text (the reply that is
  not streamed). Both must give parse's message.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from tokenizers.decoders import DecodeStream

from tests.live.model import Loaded


def pieces(loaded: Loaded, prompt_ids: list[int], ids: list[int]) -> list[str]:
    """The text each of ``ids`` adds after ``prompt_ids``, special tokens kept."""
    stream = DecodeStream(ids=list(prompt_ids), skip_special_tokens=False)
    backend = loaded.tokenizer._tokenizer  # type: ignore[attr-defined]
    return [stream.step(backend, token) or "" for token in ids]


def merge(deltas: list[dict], abandoned=()) -> dict:
    """The message a client merges from OpenAI-shaped deltas (abandoned calls left
    out); content and reasoning None where no delta carried any text."""
    content, reasoning = [], []
    calls: dict[int, dict] = {}
    problems = []
    for delta in deltas:
        content.append(delta.get("content") or "")
        reasoning.append(delta.get("reasoning_content") or "")
        for part in delta.get("tool_calls") or ():
            index = part["index"]
            function = part.get("function") or {}
            if index not in calls:
                if calls and index < max(calls):
                    problems.append(f"call index {index} after {max(calls)}")
                if "name" not in function:
                    problems.append(f"call {index}'s first delta has no name")
                calls[index] = {"id": None, "name": None, "arguments": ""}
            call = calls[index]
            if part.get("id") is not None:
                call["id"] = part["id"]
            if "name" in function:
                call["name"] = function["name"]
            call["arguments"] += function.get("arguments") or ""
    for index in abandoned:
        calls.pop(index, None)
    return {
        "content": "".join(content) or None,
        "reasoning_content": "".join(reasoning) or None,
        "tool_calls": [calls[index] for index in sorted(calls)],
        "problems": problems,
    }


def plain(message: dict) -> dict:
    """parse's message in merge's shape (content "" and None alike)."""
    return {
        "content": message.get("content") or None,
        "reasoning_content": message.get("reasoning_content") or None,
        "tool_calls": [
            {
                "id": call.get("id"),
                "name": call["function"]["name"],
                "arguments": call["function"]["arguments"],
            }
            for call in message.get("tool_calls") or ()
        ],
        "problems": [],
    }


def differences(got: dict, want: dict, *, exact_arguments: bool = True) -> list[str]:
    """What differs between two messages in merge's shape (ids compared where both
    have one: a server makes its own)."""
    found = list(got["problems"])
    for key in ("content", "reasoning_content"):
        if got[key] != want[key]:
            found.append(f"{key} {_short(got[key])} vs {_short(want[key])}")
    if len(got["tool_calls"]) != len(want["tool_calls"]):
        found.append(f"{len(got['tool_calls'])} calls vs {len(want['tool_calls'])}")
        return found
    for index, (mine, theirs) in enumerate(
        zip(got["tool_calls"], want["tool_calls"], strict=True)
    ):
        if mine["name"] != theirs["name"]:
            found.append(f"call {index}: name {mine['name']!r} vs {theirs['name']!r}")
        if mine["arguments"] == theirs["arguments"]:
            continue
        if exact_arguments or not _same_json(mine["arguments"], theirs["arguments"]):
            found.append(
                f"call {index}: arguments {_short(mine['arguments'])} vs"
                f" {_short(theirs['arguments'])}"
            )
    return found


def _same_json(left: str, right: str) -> bool:
    try:
        return json.loads(left) == json.loads(right)
    except ValueError:
        return False


def _short(value: Any, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def stream_vs_parse(
    module, texts: list[str], *, tools, enable_thinking
) -> tuple[dict, list[str]]:
    """(parse's message, how the stream fed ``texts`` one by one differs from it)."""
    whole = "".join(texts)
    message = module.parse(whole, tools=tools, enable_thinking=enable_thinking)
    parser = module.StreamParser(tools=tools, enable_thinking=enable_thinking)
    deltas = []
    for text in texts:
        deltas += parser.feed(text)
    deltas += parser.finish()
    return message, differences(merge(deltas, parser.abandoned), plain(message))


class VllmPath:
    """The vLLM plugin of each format, loaded once per format in one folder."""

    def __init__(self, loaded: Loaded):
        self.loaded = loaded
        self.folder = Path(tempfile.mkdtemp(prefix="chatfmt-live-vllm-"))
        self.classes: dict[str, Any] = {}

    def parser_class(self, slug: str, spec_path: Path):
        if slug not in self.classes:
            from vllm.parser.parser_manager import ParserManager
            from vllm.reasoning import ReasoningParserManager
            from vllm.tool_parsers import ToolParserManager

            from tests.servers.build_plugin import plugin_text

            name = f"chatfmt-live-{slug}"
            path = self.folder / f"chatfmt_live_{slug}.py"
            path.write_text(plugin_text("vllm", spec_path, name), encoding="utf-8")
            ToolParserManager.import_tool_parser(str(path))
            ReasoningParserManager.import_reasoning_parser(str(path))
            self.classes[slug] = ParserManager.get_parser(
                tool_parser_name=name,
                reasoning_parser_name=name,
                enable_auto_tools=True,
            )
        return self.classes[slug]

    def read(
        self,
        slug: str,
        spec_path: Path,
        *,
        messages: list[dict],
        tools: list[dict],
        template_kwargs: dict,
        prompt_ids: list[int],
        output_ids: list[int],
        ended: bool,
        finished: bool,
        stop: list[str],
        want: dict,
    ) -> list[str]:
        """How the plugin's streamed and whole readings of the output differ from
        ``want`` (parse's message): ``output_ids`` are the output's ids, the model's
        end-of-sequence token last where ``ended``; ``finished``: the output ended
        (at that token or at one of the ``stop`` strings, which vLLM's detokenizer
        cuts off the text), else the token cap cut it."""
        from vllm.entrypoints.openai.chat_completion.protocol import (
            ChatCompletionRequest,
        )
        from vllm.entrypoints.openai.chat_completion.stream_processor import (
            ChatStreamProcessor,
        )

        cls = self.parser_class(slug, spec_path)
        request = ChatCompletionRequest(
            messages=messages,
            model="SmolLM2-135M-Instruct",
            tools=tools,
            tool_choice="auto",
            parallel_tool_calls=False,
            chat_template_kwargs=template_kwargs,
        )
        tokenizer = self.loaded.tokenizer
        parser = cls(tokenizer, request.tools, chat_template_kwargs=template_kwargs)
        request = parser.adjust_request(request)
        detokenizer = self._detokenizer(prompt_ids, request.skip_special_tokens, stop)
        processor = ChatStreamProcessor(
            request, parser, enable_auto_tools=True, parser_cls=cls
        )
        deltas = []
        for at, token in enumerate(output_ids):
            last = at == len(output_ids) - 1
            detokenizer.update([token], last and ended)
            text = detokenizer.get_next_output_text(last, delta=True)
            finish = ("stop" if finished else "length") if last else None
            step = processor.step(text, [token], finish, list(prompt_ids))
            if step.delta is not None:
                deltas.append(_delta_dict(step.delta))
        abandoned: set[int] = set()
        for owner in (parser.tool_parser, parser.reasoning_parser):
            reader = getattr(owner, "_reader", None)
            if reader is not None:
                abandoned |= set(reader.parser.abandoned)
        found = []
        streamed = merge(deltas, sorted(abandoned))
        for call in streamed["tool_calls"]:
            if not call["id"]:
                found.append("a streamed call without an id")
        found += [
            "streamed: " + line
            for line in differences(streamed, want, exact_arguments=False)
        ]
        text = detokenizer.get_next_output_text(True, delta=False)
        reasoning, content, calls = cls(
            tokenizer, request.tools, chat_template_kwargs=template_kwargs
        ).parse(text, request, enable_auto_tools=True)
        whole = {
            "content": content or None,
            "reasoning_content": reasoning or None,
            "tool_calls": [
                {"id": call.id, "name": call.name, "arguments": call.arguments}
                for call in calls or ()
            ],
            "problems": [],
        }
        found += [
            "whole: " + line for line in differences(whole, want, exact_arguments=False)
        ]
        return found

    def _detokenizer(
        self, prompt_ids: list[int], skip_special_tokens: bool, stop: list[str]
    ):
        """vLLM's engine detokenizer for one request."""
        from vllm.sampling_params import SamplingParams
        from vllm.v1.engine import EngineCoreRequest
        from vllm.v1.engine.detokenizer import IncrementalDetokenizer

        params = SamplingParams(
            max_tokens=1 << 20,
            skip_special_tokens=skip_special_tokens,
            stop=list(stop) or None,
        )
        request = EngineCoreRequest(
            request_id="live",
            prompt_token_ids=list(prompt_ids),
            mm_features=None,
            sampling_params=params,
            pooling_params=None,
            arrival_time=0.0,
            lora_request=None,
            cache_salt=None,
            data_parallel_rank=None,
        )
        return IncrementalDetokenizer.from_new_request(self.loaded.tokenizer, request)


def _delta_dict(delta) -> dict:
    """vLLM's DeltaMessage as an OpenAI delta dict."""
    found: dict[str, Any] = {}
    if delta.content:
        found["content"] = delta.content
    if delta.reasoning:
        found["reasoning_content"] = delta.reasoning
    calls = []
    for part in delta.tool_calls or ():
        function = {}
        if part.function is not None:
            if part.function.name:
                function["name"] = part.function.name
            function["arguments"] = part.function.arguments or ""
        calls.append({"index": part.index, "id": part.id, "function": function})
    if calls:
        found["tool_calls"] = calls
    return found
