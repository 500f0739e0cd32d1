"""The invented templates render every case faithfully: a small reference decoder per
format reads the model's part of each render back into the message we rendered.

For every template in this directory and every case: ``prefix`` = history rendered with the
generation prompt, ``full`` = history + the assistant message without it; ``full`` must start
with ``prefix``, the rest must end with the format's end-of-turn marker, and the format's
decoder must give back the content, reasoning, tool names, arguments (as JSON values) and ids.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pytest

from compiler.render import ChatTemplate, RenderInputs, TemplateRaised

HERE = Path(__file__).resolve().parent
TEMPLATES = sorted(HERE.glob("*.jinja"))
INPUTS = RenderInputs("<s>", "</s>", {})

SYSTEM = "You are a test assistant. Be brief."
USER = "What is the weather in Paris?"
TOOLS: list[dict[str, Any]] = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Current weather for a city.",
        "parameters": {"type": "object", "required": ["city"], "properties": {
            "city": {"type": "string"}, "days": {"type": "integer"},
            "metric": {"type": "boolean"}}}}},
    {"type": "function", "function": {
        "name": "write_file", "description": "Write text to a file.",
        "parameters": {"type": "object", "required": ["path", "content"], "properties": {
            "path": {"type": "string"}, "content": {"type": "string"},
            "overwrite": {"type": "boolean"}, "limit": {"type": ["integer", "null"]},
            "options": {"type": "object"}, "tags": {"type": "array"}}}}},
]
TYPES = {
    tool["function"]["name"]: {
        key: spec["type"] for key, spec in tool["function"]["parameters"]["properties"].items()
    }
    for tool in TOOLS
}

WEATHER = {"city": "Paris", "days": 3, "metric": True}
TRICKY = {
    "path": 'C:\\Users\\me\\"quoted" file.txt',
    "content": 'def f(x):\n    return {"a": [x, \'b\']}  # \\n is not a newline\n\ttab «ü» 東京 🌧 & <b>',
    "overwrite": False,
    "limit": None,
    "options": {"encoding": "utf-8", "nested": {"list": [1, 2.5, None, True], "empty": {}}},
    "tags": ["a", "b c", "", "naïve"],
}


def call(name, args, index=1, *, as_string=False):
    arguments = json.dumps(args, ensure_ascii=False) if as_string else args
    return {"id": f"call{index:05d}", "type": "function",
            "function": {"name": name, "arguments": arguments}}


CASES: dict[str, dict[str, Any]] = {
    "content": {"content": "The weather is fine."},
    "content_markup": {"content": "Result:\n```python\nprint({'a': 1})\n```\n<b>bold</b> & [x] {y}"},
    "one_call": {"content": None, "tool_calls": [call("get_weather", WEATHER)]},
    "one_call_empty_content": {"content": "", "tool_calls": [call("get_weather", WEATHER)]},
    "parallel_calls": {"content": None, "tool_calls": [
        call("get_weather", WEATHER, 1), call("get_weather", {"city": "Zürich"}, 2)]},
    "content_then_call": {"content": "Let me look that up.",
                          "tool_calls": [call("get_weather", WEATHER)]},
    "tricky_arguments": {"content": None, "tool_calls": [call("write_file", TRICKY)]},
    "string_arguments": {"content": None,
                         "tool_calls": [call("get_weather", WEATHER, as_string=True)]},
    "reasoning_content": {"reasoning_content": "The user wants weather.\nNo tool needed.",
                          "content": "It is sunny."},
    "reasoning_call": {"reasoning_content": "I should call get_weather.", "content": None,
                       "tool_calls": [call("get_weather", WEATHER)]},
}


# --- reference decoders: (model text without end-of-turn, thinking) -> (reasoning, content, calls)

def _typed(text: str, kind, python_literals: bool):
    if kind == "string":
        return text
    if python_literals and text in ("True", "False", "None"):
        return {"True": True, "False": False, "None": None}[text]
    return json.loads(text)


def _cut(pattern: str, text: str, build) -> tuple[str, list]:
    """Remove every match of ``pattern`` from ``text``; ``build`` turns each into calls."""
    calls = []
    for match in re.finditer(pattern, text, re.S):
        calls.extend(build(match))
    return re.sub(pattern, "", text, flags=re.S), calls


def decode_guillemet(text, thinking):
    rest, calls = _cut(r'«call name="([^"]+)"»(.*?)«/call»', text,
                       lambda m: [(None, m[1], json.loads(m[2]))])
    return None, rest, calls


def decode_atat(text, thinking):
    rest, calls = _cut(r"@@calls\n(.*?)\n@@end", text,
                       lambda m: [(None, c["tool"], c["input"]) for c in json.loads(m[1])])
    return None, rest, calls


def decode_namekey(text, thinking):
    content, _, lines = text.partition("<|invoke|>")
    calls = []
    for line in lines.split("\n")[1:] if lines else []:
        ((name, args),) = json.loads(line).items()
        calls.append((None, name, args))
    return None, content, calls


def decode_brace(text, thinking):
    def build(m):
        args = {}
        body = m[2].removesuffix("\n")
        for entry in body[2:].split("\n::") if body else []:
            key, _, value = entry.partition("=")
            args[key] = _typed(value, TYPES[m[1]][key], python_literals=True)
        return [(None, m[1], args)]
    rest, calls = _cut(r"\{\{call:([^}]+)\}\}\n(.*?)\{\{/call\}\}", text, build)
    return None, rest, calls


def decode_use_xml(text, thinking):
    reasoning = None
    found = re.match(r"<\|scratch\|>\n(.*?)\n<\|/scratch\|>", text, re.S)
    if found:
        reasoning, text = found[1], text[found.end():]

    def build(m):
        args = {k: _typed(v, TYPES[m[1]][k], python_literals=False)
                for k, v in re.findall(r'\n<with key="([^"]+)">(.*?)</with>', m[2], re.S)}
        return [(None, m[1], args)]
    rest, calls = _cut(r'<use tool="([^"]+)">(.*?)\n</use>', text, build)
    return reasoning, rest, calls


def decode_hash_id(text, thinking):
    rest, calls = _cut(r"\[\[call #([^:]+): ([^\]]+)\]\](.*?)\[\[/call\]\]", text,
                       lambda m: [(m[1], m[2], json.loads(m[3]))])
    return None, rest, calls


def decode_reflect(text, thinking):
    if thinking:
        text = "<reflect>\n" + text
    reasoning = None  # with thinking off the prompt already closed an empty block
    found = re.match(r"<reflect>\n(.*?)\n</reflect>", text, re.S)
    assert found or not thinking, "no reflect block"
    if found:
        reasoning, text = found[1].strip() or None, text[found.end():]
    rest, calls = _cut(r"<tool-use>\n([^\n]+)\n([^\n]*)\n</tool-use>", text,
                       lambda m: [(None, m[1], json.loads(m[2]))])
    return reasoning, rest, calls


def _kwargs(text: str) -> dict:
    decoder, args, at = json.JSONDecoder(), {}, 0
    while at < len(text):
        key = re.compile(r"(\w+)=").match(text, at)
        assert key is not None, f"no key at {text[at:]!r}"
        value, at = decoder.raw_decode(text, key.end())
        args[key[1]] = value
        if text.startswith(", ", at):
            at += 2
    return args


def decode_python(text, thinking):
    rest, calls = _cut(r"⟨⟨(\w+)\((.*?)\)⟩⟩", text, lambda m: [(None, m[1], _kwargs(m[2]))])
    return None, rest, calls


def decode_pyrepr(text, thinking):
    def build(m):
        out = []
        for line in m[1].split("\n"):
            call = ast.parse(line.removeprefix("→ "), mode="eval").body
            assert isinstance(call, ast.Call) and isinstance(call.func, ast.Name), line
            out.append((None, call.func.id,
                        {kw.arg: ast.literal_eval(kw.value) for kw in call.keywords}))
        return out
    rest, calls = _cut(r"<\|acts\|>\n(.*?)\n<\|/acts\|>", text, build)
    return None, rest, calls


def decode_call_prefix(text, thinking):
    found = re.search(r"(?:^|\n)CALL ", text)
    if not found:
        return None, text, []
    content, at, calls, decoder = text[: found.start()], found.end(), [], json.JSONDecoder()
    while True:
        obj, at = decoder.raw_decode(text, at)
        calls.append((None, obj["name"], obj["arguments"]))
        if not text.startswith(";\nCALL ", at):
            break
        at += len(";\nCALL ")
    assert at == len(text), f"text after the calls: {text[at:]!r}"
    return None, content, calls


def decode_answer_act(text, thinking):
    reasoning = None
    found = re.match(r"<plan>(.*?)</plan>\n", text, re.S)
    if found:
        reasoning, text = found[1], text[found.end():]
    rest, calls = _cut(r"<act>(.*?)</act>", text, lambda m: [
        (None, json.loads(m[1])["name"], json.loads(m[1])["params"])])
    answers = re.findall(r"<answer>(.*?)</answer>", rest, re.S)
    assert re.sub(r"<answer>.*?</answer>", "", rest, flags=re.S).strip() == ""
    return reasoning, "".join(answers), calls


def decode_numbered(text, thinking):
    def build(m):
        lines = m[1].removesuffix("\n").split("\n")
        out = []
        for number, line in enumerate(lines, 1):
            numbered = re.fullmatch(r"(\d+)\. (\S+) (.*)", line)
            assert numbered is not None, f"not a numbered call: {line!r}"
            index, name, args = numbered.groups()
            assert int(index) == number
            out.append((None, name, json.loads(args)))
        return out
    rest, calls = _cut(r"<calls>\n(.*?)</calls>", text, build)
    return None, rest, calls


def decode_fenced(text, thinking):
    rest, calls = _cut(r"```tool_use\n(.*?)\n```", text,
                       lambda m: [(None, json.loads(m[1])["function"], json.loads(m[1])["args"])])
    return None, rest, calls


def decode_ponder(text, thinking):
    reasoning = None
    found = re.match(r"<ponder>(.*?)</ponder>\n", text, re.S)
    if found:
        reasoning, text = found[1] or None, text[found.end():]
    rest, calls = _cut(r"<call>(.*?)</call>", text, lambda m: [
        (None, json.loads(m[1])["name"], json.loads(m[1])["arguments"])])
    return reasoning, rest, calls


def decode_toolless(text, thinking):
    reasoning = None  # rendered with tools, the prompt opens no block
    found = re.match(r"<reason>\n(.*?)\n</reason>\n\n", text, re.S)
    if found:
        reasoning, text = found[1] or None, text[found.end():]
    rest, calls = _cut(r'<invoke fn="([^"]+)">(.*?)</invoke>', text,
                       lambda m: [(None, m[1], json.loads(m[2]))])
    return reasoning, rest, calls


def decode_bracket(text, thinking):
    reasoning = None  # no opener: reasoning is what the delimiter ends
    if "\n[[ANSWER]]\n" in text:
        reasoning, _, text = text.partition("\n[[ANSWER]]\n")
    rest, calls = _cut(r"\[\[call\]\](.*?)\[\[/call\]\]", text, lambda m: [
        (None, json.loads(m[1])["name"], json.loads(m[1])["arguments"])])
    return reasoning, rest, calls


def decode_actions(text, thinking):
    found = re.search(r"<actions>\n(.*?)</actions>", text, re.S)
    if found is None:
        return None, text, []
    note, calls = _cut(r'<do name="([^"]+)">(.*?)</do>\n', found[1],
                       lambda m: [(None, m[1], json.loads(m[2]))])
    return None, text[: found.start()] + note + text[found.end():], calls


def decode_reopen(text, thinking):
    content, reopened, rest = text.partition("[done]\n[assistant]\n")
    if not reopened and text.startswith("<fn>"):
        content, rest = "", text
    left, calls = _cut(r"<fn>(.*?)</fn>", rest, lambda m: [
        (None, json.loads(m[1])["name"], json.loads(m[1])["arguments"])])
    assert not left.strip(), f"text beside the calls: {left!r}"
    return None, content, calls


def decode_openai_nested(text, thinking):
    def build(m):
        calls = json.loads(m[1])
        assert all(c["type"] == "function" and set(c) == {"id", "type", "function"} for c in calls)
        return [(c["id"], c["function"]["name"], c["function"]["arguments"]) for c in calls]
    rest, calls = _cut(r"<\|tool_calls\|>(.*?)<\|/tool_calls\|>", text, build)
    return None, rest, calls


def decode_muse(text, thinking):
    reasoning = None
    found = re.match(r"<muse>(.*?)</muse>\n", text, re.S)
    if found:
        reasoning, text = found[1], text[found.end():]

    def build(m):
        args = {k: _typed(v, TYPES[m[1]][k], python_literals=False)
                for k, v in re.findall(r"<key>([^<]+)</key><val>(.*?)</val>\n", m[2], re.S)}
        return [(None, m[1], args)]
    rest, calls = _cut(r"\n<call>\n<fn=([^>]+)>\n(.*?)</fn>\n</call>", text, build)
    return reasoning, rest, calls


def decode_muse_invoke(text, thinking):
    reasoning = None
    found = re.match(r"<\|muse\|>\n(.*?)\n<\|/muse\|>\n", text, re.S)
    if found:
        reasoning, text = found[1], text[found.end():]
    rest, calls = _cut(r"<\|invoke:([^|]+)\|>(.*?)<\|/invoke\|>", text,
                       lambda m: [(None, m[1], json.loads(m[2]))])
    return reasoning, rest, calls


def decode_pylist(text, thinking):
    # A string is written as it is between single quotes: a unit ends where the next
    # key of the tool's own starts (no test value holds ", key=").
    def build(m):
        out = []
        for found in re.finditer(r"(\w+)\((.*?)\)(?=, \w+\(|$)", m[1], re.S):
            name, body = found[1], found[2]
            keys = "|".join(map(re.escape, TYPES[name]))
            starts = list(re.finditer(rf"(?:^|, )({keys})=", body))
            args = {}
            for index, start in enumerate(starts):
                end = starts[index + 1].start() if index + 1 < len(starts) else len(body)
                value = body[start.end():end]
                if TYPES[name][start[1]] == "string":
                    assert value[0] == value[-1] == "'", value
                    args[start[1]] = value[1:-1]
                else:
                    args[start[1]] = ast.literal_eval(value)
            out.append((None, name, args))
        return out
    rest, calls = _cut(r"<\|py\|>\[(.*?)\]<\|/py\|>", text, build)
    return None, rest, calls


def decode_keyword(text, thinking):
    # A string is written as it is between single quotes, other values as JSON: a unit
    # ends where the next key of the tool's own starts (no test value holds ", key=").
    def build(m):
        out = []
        for found in re.finditer(r"(\w+)\((.*?)\)(?=\n\w+\(|$)", m[1], re.S):
            name, body = found[1], found[2]
            keys = "|".join(map(re.escape, TYPES[name]))
            starts = list(re.finditer(rf"(?:^|, )({keys})=", body))
            args = {}
            for index, start in enumerate(starts):
                end = starts[index + 1].start() if index + 1 < len(starts) else len(body)
                value = body[start.end():end]
                if TYPES[name][start[1]] == "string":
                    assert value[0] == value[-1] == "'", value
                    args[start[1]] = value[1:-1]
                else:
                    args[start[1]] = json.loads(value)
            out.append((None, name, args))
        return out
    rest, calls = _cut(r"<\|calls\|>\n(.*?)\n<\|/calls\|>", text, build)
    return None, rest, calls


def decode_stated(text, thinking):
    # the template writes back no reasoning, and the content as it is
    rest, calls = _cut(r"<fn_call>(.*?)</fn_call>", text, lambda m: [
        (None, json.loads(m[1])["name"], json.loads(m[1])["arguments"])])
    return None, rest, calls


def decode_deliberate(text, thinking):
    # rendered without its own switch (deliberate), the template drops the reasoning
    rest, calls = _cut(r"<tool_request>(.*?)</tool_request>", text, lambda m: [
        (None, json.loads(m[1])["name"], json.loads(m[1])["arguments"])])
    return None, rest, calls


def decode_tool_label(text, thinking):
    # the renders here are made with tools: an answer opens with the label
    rest, calls = _cut(r"<calls>(.*?)</calls>", text, lambda m: [
        (None, c["name"], c["arguments"]) for c in json.loads(m[1])])
    assert not rest or rest.startswith("答复："), rest
    return None, rest.removeprefix("答复："), calls


def decode_relay(text, thinking):
    reasoning, content, calls = None, [], []
    for message in text.split("<|m|>bot"):  # the prompt opened the first
        header, _, body = message.partition("<|body|>")
        body = body.removesuffix("<|stop|>").removesuffix("<|invoke|>")
        if header == "<|lane|>scratch":
            reasoning = body
        elif header == "<|lane|>reply":
            content.append(body)
        elif header.startswith(" for=tools."):
            name = header.removeprefix(" for=tools.").partition("<|lane|>")[0]
            calls.append((None, name, json.loads(body)))
        else:
            assert not message, f"no message: {message!r}"
    return reasoning, "".join(content), calls


    found = re.match(r"<\|muse\|>\n(.*?)\n<\|/muse\|>\n", text, re.S)
    if found:
        reasoning, text = found[1], text[found.end():]
    rest, calls = _cut(r"<\|invoke:([^|]+)\|>(.*?)<\|/invoke\|>", text,
                       lambda m: [(None, m[1], json.loads(m[2]))])
    return reasoning, rest, calls


def decode_header_ended(text, thinking):
    rest, calls = _cut(r"\n<run>(.*?)</run>", text, lambda m: [
        (None, json.loads(m[1])["name"], json.loads(m[1])["arguments"])])
    return None, rest, calls


def decode_voice(text, thinking):
    rest, calls = _cut(r"\n?<\|act\|>(.*?)<\|/act\|>", text, lambda m: [
        (None, json.loads(m[1])["name"], json.loads(m[1])["arguments"])])
    return None, rest, calls


def decode_closing_rules(text, thinking):
    rest, calls = _cut(r"\nACT (\[.*\])", text, lambda m: [
        (None, c["tool"], c["input"]) for c in json.loads(m[1])])
    return None, rest, calls


def decode_mull_reply(text, thinking):
    reasoning = None
    found = re.match(r"<mull>\n(.*?)\n</mull>\n", text, re.S)
    if found:
        reasoning, text = found[1], text[found.end():]
    rest, calls = _cut(r"\n<call>(.*?)</call>", text, lambda m: [
        (None, json.loads(m[1])["name"], json.loads(m[1])["arguments"])])
    # the renders here are made with tools: an answer opens with the label
    assert not rest or rest.startswith("回答："), rest
    return reasoning, rest.removeprefix("回答："), calls


def decode_reverie(text, thinking):
    reasoning = None
    inside = thinking  # thinking on: the prompt opened the block
    if not thinking and text.startswith("<reverie>\n"):
        text, inside = text[len("<reverie>\n"):], True
    if inside:
        reasoning, _, text = text.partition("\n</reverie>\n")
    rest, calls = _cut(r"<act>(.*?)</act>", text, lambda m: [
        (None, json.loads(m[1])["name"], json.loads(m[1])["arguments"])])
    return reasoning or None, rest, calls


def decode_weigh(text, thinking):
    # rendered without skip_reasoning, the prompt opens the block
    reasoning, _, text = text.partition("\n</weigh>\n")
    rest, calls = _cut(r"<invoke>(.*?)</invoke>", text, lambda m: [
        (None, json.loads(m[1])["name"], json.loads(m[1])["arguments"])])
    return reasoning or None, rest, calls


def decode_jot(text, thinking):
    # the prompt opens the block; rendered not for training, the turn's is empty
    reasoning, _, text = text.partition("\n</jot>\n")
    assert not reasoning, reasoning
    rest, calls = _cut(r"<fn_call>(.*?)</fn_call>", text, lambda m: [
        (None, json.loads(m[1])["name"], json.loads(m[1])["arguments"])])
    return None, rest, calls


def decode_mull(text, thinking):
    reasoning = None  # thinking off: the prompt closed an empty block
    if thinking:  # thinking on: the prompt opened it
        reasoning, _, text = text.partition("\n</mull>\n\n")
    rest, calls = _cut(r"<tool>(.*?)</tool>", text, lambda m: [
        (None, json.loads(m[1])["name"], json.loads(m[1])["arguments"])])
    return reasoning or None, rest, calls


def decode_role_sep(text, thinking):
    # rendered with neither switch: the prompt stops at the role, the turn names it
    reasoning = None
    if text.startswith("/think<|role_sep|>"):
        reasoning, _, text = text[len("/think<|role_sep|>"):].partition(
            "<|turn_end|>\n<|turn|>assistant")
    assert text.startswith("<|role_sep|>"), text
    rest, calls = _cut(r"<call>(.*?)</call>", text[len("<|role_sep|>"):], lambda m: [
        (None, json.loads(m[1])["name"], json.loads(m[1])["arguments"])])
    return reasoning, rest, calls


@dataclass(frozen=True)
class Format:
    end_of_turn: str | tuple[str, ...]  # (a turn that ends otherwise with calls)
    decode: Callable
    reasoning: bool = False  # renders reasoning_content
    toggle: bool = False  # the prompt depends on enable_thinking
    string_arguments: bool = True  # False: refuses (raise_exception) arguments given as text
    ids: bool = False  # writes the call ids
    result_ids: bool = False  # writes tool_call_id in tool results
    message_end: str = ""  # what ends a user's message, where it is not end_of_turn
    # The opening of a turn the template writes after the conversation, before the
    # generation prompt (Command R+'s closing system turn): the prompt is then no
    # beginning of the conversation with the assistant's turn.
    closing_turn: str = ""
    user_text: bool = True  # False: a user's turn is written without its text


FORMATS = {
    "guillemet_calls": Format("<|fin|>", decode_guillemet),
    "atat_section": Format("<|/msg|>", decode_atat),
    "namekey_jsonl": Format("<|endofmsg|>", decode_namekey),
    "brace_tagged": Format("<eot/>", decode_brace, string_arguments=False),
    "use_tool_xml": Format("</turn>", decode_use_xml, reasoning=True, string_arguments=False),
    "hash_id_calls": Format("<|done|>", decode_hash_id, ids=True, result_ids=True),
    "reflect_think": Format("<|turn:end|>", decode_reflect, reasoning=True, toggle=True),
    "python_calls": Format("<|stop|>", decode_python, string_arguments=False),
    "pyrepr_calls": Format("<|eom|>", decode_pyrepr, string_arguments=False),
    "call_prefix_semicolon": Format("\n[END]", decode_call_prefix),
    "answer_act": Format(INPUTS.eos, decode_answer_act, reasoning=True),
    "numbered_calls": Format("<<end>>", decode_numbered),
    "fenced_json": Format("<|over|>", decode_fenced, result_ids=True),
    "ponder_calls": Format("<|eot|>", decode_ponder, reasoning=True),
    "toolless_reason": Format("<|finish|>", decode_toolless, reasoning=True),
    "bracket_answer": Format("[[/turn]]", decode_bracket, reasoning=True),
    "actions_preface": Format("<turn-over>", decode_actions),
    "reopen_turn": Format("[done]", decode_reopen),
    "openai_nested": Format("<|msg_end|>", decode_openai_nested, ids=True, result_ids=True),
    "muse_keyval": Format("<|stop_turn|>", decode_muse, reasoning=True, string_arguments=False),
    "pylist_raw_calls": Format("<|end_of_turn|>", decode_pylist, string_arguments=False),
    "deliberate_switch": Format("<|close|>", decode_deliberate),
    "keyword_calls": Format("<|said_end|>", decode_keyword, string_arguments=False),
    "stated_tags": Format("<|turn_over|>", decode_stated),
    "tool_label": Format("<|reply_end|>", decode_tool_label),
    "relay_messages": Format(("<|done|>", "<|invoke|>"), decode_relay, reasoning=True,
                             message_end="<|stop|>"),
    "muse_invoke": Format("<|end-of-reply|>", decode_muse_invoke, reasoning=True),
    "header_ended": Format("", decode_header_ended),
    "closing_rules": Format("<|done|>", decode_closing_rules, closing_turn="<|turn|><|rules|>"),
    "mull_reply": Format("<|over|>", decode_mull_reply, reasoning=True),
    "voice_listener": Format("<|hush|>", decode_voice, user_text=False),
    "reverie_off_default": Format("<|over|>", decode_reverie, reasoning=True),
    "skip_weighing": Format("<|yield|>", decode_weigh, reasoning=True),
    "jot_training": Format("<|fin_turn|>", decode_jot),
    "mull_undecided": Format("<|halt|>", decode_mull, reasoning=True, toggle=True),
    "role_sep_think": Format("<|turn_end|>", decode_role_sep, reasoning=True),
}


def load(path: Path) -> ChatTemplate:
    return ChatTemplate(path.read_text(encoding="utf-8"), f"tests/invented/{path.name}", INPUTS)


def history():
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": USER}]


def test_every_template_has_a_decoder():
    assert TEMPLATES, "no templates found"
    assert sorted(p.stem for p in TEMPLATES) == sorted(FORMATS)


def model_text(template: ChatTemplate, fmt: Format, message: dict, thinking: bool) -> str | None:
    """The model's part of the render, end-of-turn removed; None when not expressible."""
    prefix = template.render(history(), tools=TOOLS, add_generation_prompt=True,
                             enable_thinking=thinking)
    full = template.render(history() + [{"role": "assistant", **message}], tools=TOOLS,
                           enable_thinking=thinking)
    if fmt.toggle and not thinking and message.get("reasoning_content"):
        # the prompt closed an empty reasoning block: reasoning can't follow it
        assert not full.startswith(prefix)
        return None
    if fmt.closing_turn:
        # history, closing turn, generation prompt; history, the turn, closing turn
        base = template.render(history(), tools=TOOLS, enable_thinking=thinking)
        head, closing = base[: base.rindex(fmt.closing_turn)], base[base.rindex(fmt.closing_turn):]
        assert prefix == base + prefix[len(base):] and full.endswith(closing)
        prefix, full = head + prefix[len(base):], full[: len(full) - len(closing)]
    assert full.startswith(prefix), "the conversation does not extend the prompt"
    text = full[len(prefix):].rstrip()
    ends = fmt.end_of_turn if isinstance(fmt.end_of_turn, tuple) else (fmt.end_of_turn,)
    end = next((end for end in ends if text.endswith(end)), None)
    assert end is not None, f"no end-of-turn marker: {text[-40:]!r}"
    return text[: len(text) - len(end)]


def expected(message: dict, fmt: Format):
    calls = [(c["id"] if fmt.ids else None, c["function"]["name"],
              c["function"]["arguments"] if isinstance(c["function"]["arguments"], dict)
              else json.loads(c["function"]["arguments"]))
             for c in message.get("tool_calls", [])]
    reasoning = message.get("reasoning_content") if fmt.reasoning else None
    return reasoning, (message.get("content") or "").strip(), calls


@pytest.mark.parametrize("thinking", [True, False], ids=["think", "nothink"])
@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("path", TEMPLATES, ids=lambda p: p.stem)
def test_round_trip(path, case, thinking):
    fmt, template, message = FORMATS[path.stem], load(path), CASES[case]
    if case == "string_arguments" and not fmt.string_arguments:
        with pytest.raises(TemplateRaised):
            model_text(template, fmt, message, thinking)
        return
    text = model_text(template, fmt, message, thinking)
    if text is None:
        return
    reasoning, content, calls = fmt.decode(text, thinking)
    assert (reasoning, content.strip(), calls) == expected(message, fmt), text


@pytest.mark.parametrize("path", TEMPLATES, ids=lambda p: p.stem)
def test_decoder_notices_a_changed_value(path):
    fmt, template = FORMATS[path.stem], load(path)
    message = CASES["content_then_call"]
    text = model_text(template, fmt, message, True)
    assert text is not None
    text = text.replace("Paris", "Lyon", 1)
    reasoning, content, calls = fmt.decode(text, True)
    assert (reasoning, content.strip(), calls) != expected(message, fmt)


@pytest.mark.parametrize("path", TEMPLATES, ids=lambda p: p.stem)
def test_prompt_has_system_tools_results_and_generation_prompt(path):
    fmt, template = FORMATS[path.stem], load(path)
    without = template.render(history(), tools=TOOLS)
    prompt = template.render(history(), tools=TOOLS, add_generation_prompt=True)
    generation = prompt[len(without):]
    assert prompt.startswith(without) and generation.strip(), "no generation prompt"
    assert SYSTEM in without
    if fmt.user_text:
        assert USER + (fmt.message_end or fmt.end_of_turn) in without
    else:
        assert USER not in without
    for tool in TOOLS:  # the definitions, not just the names
        for word in (tool["function"]["name"], tool["function"]["description"], *TYPES[
                tool["function"]["name"]]):
            assert word in without

    calls = CASES["parallel_calls"]["tool_calls"]
    conversation = history() + [
        {"role": "assistant", "content": None, "tool_calls": calls},
        {"role": "tool", "tool_call_id": calls[0]["id"], "content": "sunny, 21 °C"},
        {"role": "tool", "tool_call_id": calls[1]["id"], "content": '{"temp": -3}'},
    ]
    rendered = template.render(conversation, tools=TOOLS, add_generation_prompt=True)
    assert rendered.endswith(generation)
    results = rendered[rendered.index("Zürich"):]
    for result in conversation[-2:]:
        assert result["content"] in results
        if fmt.result_ids:
            assert result["tool_call_id"] in results


@pytest.mark.parametrize("path", TEMPLATES, ids=lambda p: p.stem)
def test_long_conversation_renders(path):
    """A second user turn after a finished tool exchange: earlier turns keep rendering."""
    template = load(path)
    turn = CASES["reasoning_call"]
    conversation = history() + [
        {"role": "assistant", **turn},
        {"role": "tool", "tool_call_id": "call00001", "content": "rain"},
        {"role": "assistant", "content": "It rains in Paris."},
        {"role": "user", "content": "And tomorrow?"},
    ]
    for thinking in (True, False):
        rendered = template.render(conversation, tools=TOOLS, add_generation_prompt=True,
                                   enable_thinking=thinking)
        assert "It rains in Paris." in rendered and rendered.count("get_weather") >= 2
