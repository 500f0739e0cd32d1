"""Where a turn ends and where the model's output begins (issue 31): end-of-turn
markers from every source (the eos given to the build, a list where one marker
follows or ends in another, the headers of the messages that follow a turn), markers
the generation prompt has begun, and other wrappers of the content a reviewed
override names (``content.start_also``).

The templates are the corpus's and the invented ones of ``tests/invented/`` built
here (``header_ended``, ``closing_rules``, ``mull_reply``); the outputs are written
by hand, as a model writes them beside its template. Each is read by ``parse`` and by
the stream at every chunking the stream tests use.
"""

from __future__ import annotations

import copy
import importlib
import json
import os

import pytest
import yaml

from compiler import model
from compiler.build import build
from compiler.codegen.module import load
from compiler.loader import load_generated
from compiler.sources import discover
from compiler.spec import SpecError, apply_overrides
from tests import roundtrip as rt
from tests.test_stream import chunkings, merge, streamed

INVENTED = ("header_ended", "closing_rules", "mull_reply")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The invented templates of this issue, built as a user's templates are."""
    out = tmp_path_factory.mktemp("turn_markers")
    paths = [os.path.join(rt.ROOT, "tests", "invented", f"{slug}.jinja") for slug in INVENTED]
    report = build(discover(None, paths), str(out / "specs"), str(out / "generated"), log=lambda m: None)
    assert report.failures == [] and report.warnings == []
    return out


def _module(out, slug):
    return load_generated(out / "generated", slug)


def _spec(out, slug) -> dict:
    return yaml.safe_load((out / "specs" / f"{slug}.yaml").read_text(encoding="utf-8"))


def _read(module, text, **options) -> dict:
    """parse's message, which the stream gives too at every chunking."""
    message = module.parse(text, **options)
    for name, cuts in chunkings(text, text):
        fed, finished, abandoned = streamed(module, text, cuts, **options)
        assert merge(fed + finished, abandoned) == message, (name, text)
    return message


def _calls(message) -> list:
    return [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in message["tool_calls"]]


def _format(spec: dict, *overrides: dict, slug: str = "patched") -> model.Format:
    """The format of ``spec`` with ``overrides`` applied (as a build applies them)."""
    body = {key: value for key, value in spec.items() if key != "overrides"}
    patched, _ = apply_overrides(body, [dict(o, reason="test", evidence="this test") for o in overrides], "x.yaml")
    return model.build(patched, slug=slug, origin="x.yaml")


def _patched(spec: dict, *overrides: dict, slug: str = "patched"):
    """The module of ``spec`` with ``overrides`` applied."""
    return load(_format(spec, *overrides, slug=slug))


def _corpus_spec(slug) -> dict:
    return yaml.safe_load(open(os.path.join(rt.ROOT, "specs", f"{slug}.yaml"), encoding="utf-8"))


# -- end of turn from every source ------------------------------------------------------


@pytest.mark.parametrize(
    "markers",
    [
        ["<|im_end|>", "<|endofturn|>"],  # one written after the other
        ["<|endofturn|>", "<|im_end|><|endofturn|>"],  # one ends in the other
    ],
)
def test_a_list_of_end_of_turn_markers_ends_the_turn_the_model_writes(markers):
    """HyperCLOVA X writes its template's <|im_end|> and then the tokenizer's
    <|endofturn|>: a list naming both reads the turn's end whole, as the joined
    string did, in parse and the stream; text between or before them stays."""
    module = _patched(
        _corpus_spec("qwen_qwen2_5_7b_instruct"), {"path": "end_of_turn.markers", "value": markers}
    )
    for text, content in [
        ("It is 42.<|im_end|><|endofturn|>", "It is 42."),
        ("It is 42.<|im_end|><|endofturn|>\n", "It is 42."),
        ("It is 42.<|endofturn|>", "It is 42."),
        ("It is 42.<|im_end|>", "It is 42." if "<|im_end|>" in markers else "It is 42.<|im_end|>"),
        ("<|im_end|> and <|endofturn|> are markers.", "<|im_end|> and <|endofturn|> are markers."),
    ]:
        assert _read(module, text)["content"] == content, text
    # Strict reading keeps to the template's form, as the grammars do: one marker,
    # the longest written.
    strict = module.parse("It is 42.<|im_end|><|endofturn|>", strict=True)
    assert strict["content"] == ("It is 42.<|im_end|>" if "<|im_end|>" in markers else "It is 42.")


def test_the_eos_given_to_the_build_ends_a_turn(tmp_path):
    """An --eos-token (here a ChatML template whose turns end with <|im_end|>, built
    with the tokenizer's eos as HyperCLOVA X's) is an end-of-turn marker, whether or
    not the template writes it."""
    path = os.path.join(rt.ROOT, "templates", "Qwen-Qwen2.5-7B-Instruct.jinja")
    sources = discover(None, [path], {"eos_token": "<|endofturn|>"})
    report = build(sources, str(tmp_path / "s"), str(tmp_path / "g"), log=lambda m: None)
    assert report.failures == []
    module = load_generated(tmp_path / "g", sources[0].slug)
    assert module.STOP[:2] == ["<|im_end|>", "<|endofturn|>"]
    assert "'<|endofturn|>'" in module.__doc__
    for text in ("It is 42.<|im_end|><|endofturn|>", "It is 42.<|endofturn|>"):
        assert _read(module, text)["content"] == "It is 42.", text


def test_a_turn_the_next_header_ends_reads_without_it(built):
    """header_ended writes nothing after a turn: the next message's header follows it
    (as GLM's <|user|> and <|observation|>). Built with no tokenizer, the headers the
    template writes for a user, a tool result and a system message end a turn too,
    dropped only at the end of the output."""
    module = _module(built, "header_ended")
    call = '<run>{"name": "get_weather", "arguments": {"city": "Oslo"}}</run>'
    for text, content, calls in [
        ("It is sunny.<|asker|>", "It is sunny.", 0),
        ("It is sunny.\n<|setup|>\n", "It is sunny.", 0),
        ("Let me look.\n" + call + "<|output|>", "Let me look.", 1),
        (call + "\n<|output|>", "", 1),
        ("Write <|asker|> to ask me.", "Write <|asker|> to ask me.", 0),
        ("It is sunny.", "It is sunny.", 0),
    ]:
        message = _read(module, text)
        assert (message["content"] or "", len(message["tool_calls"])) == (content, calls), text
    spec = _spec(built, "header_ended")
    assert spec["end_of_turn"]["markers"] == []
    headers = spec["end_of_turn"]["next_headers"]
    assert headers == ["<|asker|>", "<|output|>", "<|setup|>"]
    assert module.STOP == headers


def test_with_a_tokenizer_its_end_tokens_end_a_turn_not_the_headers(built):
    """The headers stand in for the tokenizer's stop tokens only where the source has
    no tokenizer."""
    spec = _spec(built, "header_ended")
    spec["tokens"] = {
        "source": "tokenizer.json",
        "bos": None,
        "eos": {"text": "<|eos|>", "id": 2, "special": True},
        "eos_tokens": [{"text": "<|eos|>", "id": 2, "special": True}],
        "markers": [],
    }
    assert model.build(spec, slug="x", origin="x.yaml").stop == ("<|eos|>",)


# -- markers the prompt has begun -------------------------------------------------------

SPECIAL = [{"type": "function", "function": {"name": "special_function", "parameters": {
    "type": "object", "properties": {"arg1": {"type": "integer"}}, "required": ["arg1"]}}}]
ACTION = 'Action:\n```json\n[{"tool_name": "special_function", "parameters": {"arg1": 1}}]\n```'


@pytest.mark.parametrize(
    "text",
    [
        ACTION,  # after the prompt's <|CHATBOT_TOKEN|>
        "<|CHATBOT_TOKEN|>" + ACTION,  # ... and with it written again
        "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>\n" + ACTION,
        ACTION.replace("]\n```", "]```"),  # as the template writes the closer
    ],
)
def test_command_r_plus_reads_the_action_block_after_its_prompt(text):
    """Command R+'s prompt ends with <|CHATBOT_TOKEN|>, so the model's output opens
    with the markdown block: one call, no content text. The whole marker the prompt
    began is still read."""
    module = importlib.import_module("generated.cohereforai_c4ai_command_r_plus_tool_use")
    message = _read(module, text, tools=SPECIAL)
    assert _calls(message) == [("special_function", {"arg1": 1})]
    assert not message["content"]
    assert module.parse(text, tools=SPECIAL, strict=True)["tool_calls"] == message["tool_calls"]


def test_command_r_plus_content_then_calls_and_its_triggers():
    """Content before the block, as the template writes it; the trigger is the
    block's opener the model writes after the prompt, and the grammar from the
    trigger on takes the block as the template writes it."""
    from tests.test_grammar import accepts

    module = importlib.import_module("generated.cohereforai_c4ai_command_r_plus_tool_use")
    message = _read(module, "Let me run it.\n" + ACTION, tools=SPECIAL)
    assert (message["content"], _calls(message)) == ("Let me run it.", [("special_function", {"arg1": 1})])
    (trigger,) = [t["value"] for t in module.TRIGGERS]
    assert ACTION.startswith(trigger)
    block = ACTION.replace("[{", "[\n    {").replace("}]\n```", "}\n]```")  # the template's spacing
    assert accepts(module.tool_call_grammar(tools=SPECIAL), block)
    assert accepts(module.grammar(tools=SPECIAL), "Let me run it.\n" + block)
    # text that is no call stays content, the prompt's marker dropped where it starts
    assert _read(module, "<|CHATBOT_TOKEN|>Hello.<|END_OF_TURN_TOKEN|>")["content"] == "Hello."
    assert _read(module, "Say <|CHATBOT_TOKEN|>.")["content"] == "Say <|CHATBOT_TOKEN|>."


@pytest.mark.parametrize(
    "text,reasoning,content",
    [
        ("<|start|>assistant<|channel|>final<|message|>Hi.<|return|>", None, "Hi."),
        ("<|start|>assistant<|channel|>analysis<|message|>Think.<|end|>"
         "<|start|>assistant<|channel|>final<|message|>Hi.<|return|>", "Think.", "Hi."),
        ("<|channel|>final<|message|>Hi.<|return|>", None, "Hi."),
    ],
)
def test_gpt_oss_reads_an_output_that_repeats_the_message_header(text, reasoning, content):
    """Engines' tests feed GPT-OSS outputs that start with the message header the
    prompt wrote, <|start|>assistant: it is no content."""
    module = importlib.import_module("generated.openai_gpt_oss_120b")
    message = _read(module, text)
    assert (message["reasoning_content"], message["content"]) == (reasoning, content)


def test_a_prompt_that_begins_the_section_opener(built):
    """closing_rules writes a closing turn after the conversation and the generation
    prompt <|turn|><|bot|> after it (as Command R+): the section's opener is what the
    model writes after the prompt, and the prompt's marker written again is dropped."""
    module = _module(built, "closing_rules")
    block = 'ACT [{"tool": "get_weather", "input": {"city": "Oslo"}}]'
    for text, content in [
        (block + "<|done|>", ""),
        ("<|bot|>" + block, ""),
        (" <|turn|><|bot|>\n" + block + "<|done|>", ""),
        ("Let me look.\n" + block + "<|done|>", "Let me look."),
    ]:
        message = _read(module, text)
        assert (message["content"] or "", _calls(message)) == (content, [("get_weather", {"city": "Oslo"})]), text
    for text, content in [
        ("<|bot|>It is sunny.<|done|>", "It is sunny."),
        ("<|bot", "<|bot"),
        ("The <|bot|> marker.", "The <|bot|> marker."),
        ("  ", ""),
    ]:
        assert (_read(module, text)["content"] or "") == content, text
    spec = _spec(built, "closing_rules")
    assert spec["tools"]["section"]["start"] == "ACT ["
    assert spec["prompt"]["ends_with"] == ["<|turn|><|bot|>", "<|bot|>"]


# -- other wrappers of the content (content.start_also) ----------------------------------

REPLY = {"path": "content.start_also", "value": [{"start": "<reply>", "end": "</reply>"}]}


def test_an_answer_wrapper_beside_a_label(built):
    """mull_reply writes the label 回答： where tools are given (as Hunyuan A13B's
    助手：); the model writes <reply>…</reply> after its reasoning, which the template
    never does: content.start_also reads either, each with its own closer."""
    spec = _spec(built, "mull_reply")
    assert spec["content"] == {"mode": "wrapped_with_tools", "start": "回答：", "end": None}
    fmt = _format(spec, REPLY, slug="mull_reply")
    assert "'<reply>' ... '</reply>'" in fmt.content.describe()
    module = load(fmt)
    call = '<call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</call>'
    for text, reasoning, content, calls in [
        ("<mull>\nSunny, it says.\n</mull>\n<reply>\nIt is sunny.\n</reply><|over|>",
         "Sunny, it says.", "It is sunny.", 0),
        ("<reply>It is sunny.</reply>", None, "It is sunny.", 0),
        ("<mull>Check.</mull>\n<reply>Let me look.</reply>\n" + call, "Check.", "Let me look.", 1),
        ("回答：It is sunny.<|over|>", None, "It is sunny.", 0),
        ("It is sunny.", None, "It is sunny.", 0),
        ("Say <reply> and </reply>.", None, "Say <reply> and </reply>.", 0),
        ("<reply>Cut short", None, "Cut short", 0),
    ]:
        message = _read(module, text)
        assert (message["reasoning_content"], message["content"] or "") == (reasoning, content), text
        assert len(message["tool_calls"]) == calls, text
    with pytest.raises(ValueError, match="</reply>"):
        module.parse("<reply>Hi.</reply> more", strict=True)
    # without the override, the wrapper is text of the answer
    plain = _module(built, "mull_reply")
    assert plain.parse("<reply>It is sunny.</reply>")["content"] == "<reply>It is sunny.</reply>"


@pytest.mark.parametrize(
    "change,path",
    [
        ({"content": {"mode": "plain", "start": None, "end": None}}, "content.start_also"),
        ({"start_also": [{"start": "  ", "end": "</reply>"}]}, "content.start_also.0.start"),
        ({"start_also": [{"start": "回答：", "end": None}]}, "content.start_also.0.start"),
    ],
)
def test_other_content_wrappers_are_refused_where_they_cannot_be_read(built, change, path):
    spec = copy.deepcopy(_spec(built, "mull_reply"))
    spec["content"]["start_also"] = REPLY["value"]
    if "content" in change:
        spec["content"] = dict(change["content"], start_also=REPLY["value"])
    else:
        spec["content"].update(change)
    with pytest.raises(SpecError, match=path.replace(".", r"\.")):
        model.build(spec, slug="x", origin="x.yaml")


def test_other_content_wrappers_need_evidence(built):
    spec = _spec(built, "mull_reply")
    body = {key: value for key, value in spec.items() if key != "overrides"}
    with pytest.raises(SpecError, match="evidence"):
        apply_overrides(body, [dict(REPLY, reason="test")], "x.yaml")
