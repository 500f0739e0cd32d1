"""Reviewed overrides for what real models write beside their template (issue 13,
class 10): the spec language they need (other spellings of a literal, a hole the
model may leave out, other reasoning openers, an evidence line), and the overrides
the committed specs carry, read by their generated modules in parse and the stream.

The model outputs here are written by hand from the overrides' evidence (vLLM's
parser tests): the templates themselves never render them.
"""

from __future__ import annotations

import copy
import glob
import importlib
import json

import pytest

from compiler import model
from compiler.spec import SpecError, apply_overrides, load
from tests.test_stream import merge, streamed


def _module(slug):
    return importlib.import_module(f"generated.{slug}")


def _read(slug, text, **options):
    """parse's message, checked against the stream's at every chunking."""
    module = _module(slug)
    message = module.parse(text, **options)
    for size in (1, 3, 7, len(text)):
        fed, finished, abandoned = streamed(module, text, range(size, len(text), size), **options)
        assert merge(fed + finished, abandoned) == message, (size, text)
    return message


def _calls(message):
    return [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in message["tool_calls"]]


# -- the spec language --------------------------------------------------------------------


def _spec(slug):
    return load(f"specs/{slug}.yaml")


def test_an_optional_hole_gives_the_literal_before_it_the_literals_after_it():
    spec = _spec("mistral_small_3_2_24b_instruct_2506")
    calls = model.build(spec, slug="x", origin="x.yaml").calls
    assert calls is not None
    name, call_id, arguments = calls.part_options
    # after the name: [CALL_ID] (the template's), or what follows the id, skipping it
    assert name == (("[ARGS]", 1), ("", 1))
    assert call_id == (("", 0),) and arguments == ()


@pytest.mark.parametrize(
    "path,value,message",
    [
        ("tools.call.parts.0.optional", True, "tools.call.parts.0.optional"),
        ("tools.call.parts.2.optional", True, "tools.call.parts.2.optional"),
    ],
)
def test_a_part_that_cannot_be_optional_is_refused_naming_its_path(path, value, message):
    spec = _spec("mistral_small_3_2_24b_instruct_2506")
    body = {key: item for key, item in spec.items() if key != "overrides"}
    patched, _ = apply_overrides(body, [{"path": path, "value": value, "reason": "test"}], "x.yaml")
    with pytest.raises(SpecError, match=message.replace(".", r"\.")):
        model.build(patched, slug="x", origin="x.yaml")


def test_other_closers_after_key_value_arguments_are_refused():
    spec = copy.deepcopy(_spec("qwen3_coder"))
    spec["tools"]["call"]["parts"][-1]["also"] = ["</tool_call>"]
    with pytest.raises(SpecError, match=r"tools\.call\.parts\.1\.also"):
        model.build(spec, slug="x", origin="x.yaml")


def test_an_override_may_say_where_its_evidence_is_and_not_leave_it_empty():
    spec = _spec("qwen3_coder")
    body = {key: item for key, item in spec.items() if key != "overrides"}
    good = {"path": "tools.call.separator", "value": "\n", "reason": "r", "evidence": "a test"}
    apply_overrides(body, [good], "x.yaml")
    with pytest.raises(SpecError, match="evidence must be a non-empty string"):
        apply_overrides(body, [dict(good, evidence=" ")], "x.yaml")


def test_every_committed_override_gives_its_reason_and_evidence():
    found = 0
    for path in sorted(glob.glob("specs/*.yaml")):
        for override in load(path)["overrides"]:
            found += 1
            assert override["reason"].strip() and override.get("evidence", "").strip(), (path, override)
    assert found >= 8


# -- what the committed overrides read -------------------------------------------------------


TOOLS = [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}]


@pytest.mark.parametrize(
    "text",
    [
        '[TOOL_CALLS]add[CALL_ID]abc123def[ARGS]{"a": 1}',  # the template's own
        '[TOOL_CALLS]add[ARGS]{"a": 1}',  # no [CALL_ID] and id
        '[TOOL_CALLS]add{"a": 1}',  # no [ARGS] either
        'Sure. [TOOL_CALLS]add[ARGS]{"a": 1}[TOOL_CALLS]add{"a": 1}',
    ],
)
def test_mistral_small_reads_calls_with_or_without_the_id(text):
    message = _read("mistral_small_3_2_24b_instruct_2506", text, tools=TOOLS, enable_thinking=False)
    assert _calls(message) == [("add", {"a": 1})] * text.count("[TOOL_CALLS]")
    assert message["content"] == ("Sure." if text.startswith("Sure") else None)


@pytest.mark.parametrize("slug", ["unsloth_mistral_devstral_small_2507", "mistralai_ministral_3_14b_reasoning_2512"])
def test_mistral_reads_the_arguments_right_after_the_name(slug):
    message = _read(slug, '[TOOL_CALLS]add{"a": 1}[TOOL_CALLS]add[ARGS]{"a": 2}', tools=TOOLS, enable_thinking=False)
    assert _calls(message) == [("add", {"a": 1}), ("add", {"a": 2})]


def test_a_name_the_alternatives_do_not_end_is_no_call():
    # a word running past where any literal could end it: content, in both readers
    text = "[TOOL_CALLS]" + "a" * 600 + '{"a": 1}'
    message = _read("unsloth_mistral_devstral_small_2507", text, enable_thinking=False)
    assert message["tool_calls"] == [] and message["content"] == text


@pytest.mark.parametrize(
    "text",
    [
        '<|channel|>analysis<|message|>Check.<|end|><|start|>assistant to=functions.add<|channel|>commentary json<|message|>{"a": 1}<|call|>',
        '<|channel|>analysis<|message|>Check.<|end|><|start|>assistant to=functions.add<|channel|>commentary<|constrain|>json<|message|>{"a": 1}<|call|>',
        '<|channel|>analysis<|message|>Check.<|end|><|start|>assistant to=functions.add<|channel|>commentary <|constrain|>json<|message|>{"a": 1}<|end|>',
        '<|channel|>analysis<|message|>Check.<|end|><|start|>assistant to=functions.add<|channel|>analysis json<|message|>{"a": 1}<|call|>',
    ],
)
def test_gpt_oss_reads_the_headers_the_model_writes(text):
    message = _read("openai_gpt_oss_120b", text, tools=TOOLS)
    assert _calls(message) == [("add", {"a": 1})]
    assert message["reasoning_content"] == "Check." and message["content"] is None


@pytest.mark.parametrize("slug", ["google_gemma_4_31b_it", "google_gemma_4_31b_it_interleaved"])
def test_gemma_reads_a_channel_opened_without_its_name(slug):
    for text in ("<|channel>thought\nI think.<channel|>Hello.", "<|channel>I think.<channel|>Hello."):
        message = _read(slug, text)
        assert (message["reasoning_content"], message["content"]) == ("I think.", "Hello."), text


@pytest.mark.parametrize(
    "slug",
    ["meta_llama_llama_3_1_8b_instruct", "meta_llama_llama_3_2_3b_instruct", "meta_llama_llama_3_3_70b_instruct"],
)
def test_llama_reads_calls_separated_by_semicolons(slug):
    text = '{"name": "add", "parameters": {"a": 1}}; {"name": "add", "parameters": {"a": 2}} ; {"name": "add", "parameters": {}}'
    message = _read(slug, text)
    assert _calls(message) == [("add", {"a": 1}), ("add", {"a": 2}), ("add", {})]


# -- other ways real outputs start a call (tools.call.start_also) --------------------------


def test_other_call_openers_need_the_call_start_and_are_refused_naming_their_path():
    spec = copy.deepcopy(_spec("gigachat3_1_10b_a1_8b"))
    spec["tools"]["call"]["start"] = ""
    spec["tools"]["call"]["start_also"] = ["<|function_call|>"]
    with pytest.raises(SpecError, match=r"tools\.call\.start_also"):
        model.build(spec, slug="x", origin="x.yaml")
    spec["tools"]["call"]["start"] = "<|function_call|>"
    spec["tools"]["call"]["start_also"] = [" \n"]
    with pytest.raises(SpecError, match=r"tools\.call\.start_also"):
        model.build(spec, slug="x", origin="x.yaml")


def test_other_call_openers_are_tried_after_the_template_s_and_looked_for():
    calls = model.build(_spec("gigachat3_10b_a1_8b"), slug="x", origin="x.yaml").calls
    assert calls is not None
    assert calls.starts == (calls.start, "<|function_call|>")
    assert calls.triggers_also == ("<|function_call|>",)
    qwen = model.build(_spec("qwen3_coder"), slug="x", origin="x.yaml").calls
    assert qwen is not None and qwen.triggers_also == ("<function=",)


_GIGA_30 = '<|message_sep|>\n\nfunction call<|role_sep|>\n{"name": "add", "arguments": {"a": 1}}'
_GIGA_31 = '<|function_call|>{"name": "add", "arguments": {"a": 1}}'


@pytest.mark.parametrize("slug", ["gigachat3_10b_a1_8b", "gigachat3_1_10b_a1_8b"])
@pytest.mark.parametrize("call", [_GIGA_30, _GIGA_31])
@pytest.mark.parametrize("before", ["", "I'll check that for you.", "Note: <|function_call|> and <|message_sep|> here.\n"])
def test_gigachat_reads_both_headers(slug, call, before):
    message = _read(slug, before + call, tools=TOOLS)
    assert _calls(message) == [("add", {"a": 1})], (slug, before + call)
    assert message["content"] == (before.strip() or None)


@pytest.mark.parametrize("slug", ["gigachat3_10b_a1_8b", "gigachat3_1_10b_a1_8b"])
def test_gigachat_a_broken_call_after_either_header_is_content(slug):
    for text in ('<|function_call|>{"name": "add", "arguments": ', "Hi <|function_call|>no call"):
        message = _read(slug, text, tools=TOOLS)
        assert message["tool_calls"] == [] and message["content"] == text.strip(), text


@pytest.mark.parametrize("slug", ["google_gemma_4_31b_it", "google_gemma_4_31b_it_interleaved"])
def test_gemma_reads_calls_opened_without_call(slug):
    text = "Sure.<|tool_call>:add{a:1}<tool_call|><|tool_call>call:add{a:2}<tool_call|>"
    message = _read(slug, text, tools=TOOLS)
    assert _calls(message) == [("add", {"a": 1}), ("add", {"a": 2})]
    assert message["content"] == "Sure."


@pytest.mark.parametrize("slug", ["qwen3_coder", "qwen3_5_4b", "nvidia_nemotron_3_nano_30b_a3b_bf16"])
def test_qwen3_coder_reads_a_call_without_tool_call_before_it(slug):
    call = "<function=add>\n<parameter=a>\n1\n</parameter>\n</function>\n</tool_call>"
    for text in ("Let me add.\n" + call, "<tool_call>\n" + call):
        message = _read(slug, text, tools=TOOLS)
        assert _calls(message) == [("add", {"a": 1})], text
        # (where the prompt opens the reasoning, the text before the calls is reasoning)
        before = (message["reasoning_content"] or "") + (message["content"] or "")
        assert before == ("Let me add." if text.startswith("Let") else "")


@pytest.mark.parametrize("slug", ["kimi_k2_instruct", "kimi_k2_thinking", "moonshotai_kimi_k2"])
def test_kimi_reads_a_call_id_without_the_functions_namespace(slug):
    text = (
        "<|tool_calls_section_begin|><|tool_call_begin|>get_weather:0<|tool_call_argument_begin|>"
        '{"city": "Tokyo"}<|tool_call_end|><|tool_calls_section_end|>'
    )
    message = _read(slug, text, enable_thinking=False)
    assert _calls(message) == [("get_weather", {"city": "Tokyo"})]


@pytest.mark.parametrize("recipient", ["get_current_weather", "math.sum", "functions.add"])
def test_gpt_oss_reads_a_recipient_outside_the_functions_namespace(recipient):
    text = (
        "<|channel|>analysis<|message|>Check.<|end|><|start|>assistant to="
        + recipient
        + '<|channel|>commentary<|constrain|>json<|message|>{"a": 1}<|call|>'
    )
    message = _read("openai_gpt_oss_120b", text)
    assert _calls(message) == [(recipient.removeprefix("functions."), {"a": 1})]


@pytest.mark.parametrize(
    "text,reasoning,content",
    [
        ("<|channel|>final<|message|>This is a test<|end|>", None, "This is a test"),
        ("<|channel|>analysis<|message|>This is reasoning<|end|>", "This is reasoning", None),
        (
            "<|channel|>analysis<|message|>One<|end|><|start|>assistant"
            "<|channel|>final<|message|>Two<|end|>",
            "One",
            "Two",
        ),
        # <|end|> inside the output is no end of it
        (
            "<|channel|>final<|message|>Two<|end|> and more",
            None,
            "Two<|end|> and more",
        ),
    ],
)
def test_gpt_oss_reads_a_message_closed_by_end(text, reasoning, content):
    """The output stops at a message's <|end|> (end_of_turn.markers), as the template
    closes every message in the history but the last final one."""
    message = _read("openai_gpt_oss_120b", text)
    assert (message["reasoning_content"], message["content"]) == (reasoning, content)


@pytest.mark.parametrize("slug", ["gigachat3_10b_a1_8b", "gigachat3_1_10b_a1_8b"])
@pytest.mark.parametrize(
    "header", ["<|message_sep|>\n\nfunction call<|role_sep|>\n", "<|function_call|>"]
)
def test_gigachat_reads_calls_the_end_of_sequence_token_ends(slug, header):
    """'</s>' written after the call (end_of_turn.markers): the output ends there,
    the call's closer missing; inside the text it is text."""
    text = "I'll check that for you." + header + '{"name": "f", "arguments": {"a": 1}}</s>'
    message = _read(slug, text)
    assert _calls(message) == [("f", {"a": 1})]
    assert message["content"] == "I'll check that for you."
    assert _read(slug, "Hello </s> there")["content"] == "Hello </s> there"


# -- a marker before the calls (tools.call.prefix_also), another name for a member
# -- (tools.json.key_also) ------------------------------------------------------------------

_LLAMAS = ["meta_llama_llama_3_1_8b_instruct", "meta_llama_llama_3_2_3b_instruct", "meta_llama_llama_3_3_70b_instruct"]


@pytest.mark.parametrize("slug", _LLAMAS)
@pytest.mark.parametrize(
    "text",
    [
        '<|python_tag|>{"name": "add", "parameters": {"a": 1}}',
        '<|python_tag|> {"name": "add", "arguments": {"a": 1}}',
        '{"name": "add", "arguments": {"a": 1}}',
        '<|python_tag|>{"name": "add", "arguments": {"a": 1}}; {"name": "add", "parameters": {"a": 1}}',
    ],
)
def test_llama_reads_the_python_tag_and_arguments_for_parameters(slug, text):
    message = _read(slug, text)
    assert _calls(message) == [("add", {"a": 1})] * text.count('"name"')
    assert message["content"] is None


@pytest.mark.parametrize("slug", _LLAMAS)
@pytest.mark.parametrize(
    "text",
    [
        # both names at once: one member written twice, no call
        '{"name": "add", "parameters": {"a": 1}, "arguments": {"a": 2}}',
        # the marker only before the calls, not inside the content
        'Use <|python_tag|>{"name": "add", "parameters": {"a": 1}}',
        "<|python_tag|>print(1)",
    ],
)
def test_llama_what_the_alternatives_do_not_make_a_call_stays_content(slug, text):
    message = _read(slug, text)
    assert message["tool_calls"] == [] and message["content"] == text


def _patched(slug, path, value, **extra):
    spec = _spec(slug)
    body = {key: item for key, item in spec.items() if key != "overrides"}
    override = {"path": path, "value": value, "reason": "test", **extra}
    return apply_overrides(body, [override], "x.yaml")[0]


@pytest.mark.parametrize(
    "path,value",
    [
        ("tools.call.prefix_also", ["<|python_tag|>"]),
        ("tools.json.key_also", {"parameters": ["arguments"]}),
        ("tools.json", {"key_also": {"parameters": ["arguments"]}}),
    ],
)
def test_other_forms_real_outputs_write_need_evidence(path, value):
    with pytest.raises(SpecError, match="need evidence"):
        _patched("meta_llama_llama_3_1_8b_instruct", path, value)
    _patched("meta_llama_llama_3_1_8b_instruct", path, value, evidence="a test")


@pytest.mark.parametrize(
    "value",
    [{"id": ["call_id"]}, {"parameters": ["name"]}, {"name": ["fn"], "parameters": ["fn"]}],
)
def test_other_names_are_for_members_the_template_writes_and_name_no_other(value):
    patched = _patched("meta_llama_llama_3_1_8b_instruct", "tools.json.key_also", value, evidence="e")
    with pytest.raises(SpecError, match=r"tools\.json\.key_also\."):
        model.build(patched, slug="x", origin="x.yaml")


def test_a_marker_before_the_calls_must_write_more_than_whitespace():
    patched = _patched("meta_llama_llama_3_1_8b_instruct", "tools.call.prefix_also", [" "], evidence="e")
    with pytest.raises(SpecError, match=r"tools\.call\.prefix_also"):
        model.build(patched, slug="x", origin="x.yaml")


def _built(spec, slug):
    """The module ``spec`` compiles to, made in memory."""
    from compiler.loader import load_spec

    return load_spec(slug, spec)


def test_a_marker_before_a_triggered_section_is_dropped_and_looked_for():
    """Where a trigger opens the calls (Hermes' <tool_call>), a marker written
    before the section is read with it, wherever the calls start."""
    patched = _patched(
        "qwen_qwen2_5_7b_instruct", "tools.call.prefix_also", ["<|lead|>"], evidence="e"
    )
    module = _built(patched, "hermes_with_lead")
    call = '<tool_call>\n{"name": "add", "arguments": {"a": 1}}\n</tool_call>'
    for text, content in (
        ("<|lead|>" + call, None),
        ("Sure. <|lead|>" + call, "Sure."),
        ("Sure. " + call, "Sure."),
        ("Sure. <|lead|> no call", "Sure. <|lead|> no call"),
    ):
        message = module.parse(text)
        for size in (1, 3, 7):
            fed, finished, abandoned = streamed(module, text, range(size, len(text), size))
            assert merge(fed + finished, abandoned) == message, (size, text)
        assert message["content"] == content, text
        assert _calls(message) == ([("add", {"a": 1})] if "tool_call" in text else [])


# -- a turn of several messages (the spec's messages; messages.content_also) ---------------

_PLAN = "<|channel|>analysis<|message|>Plan.<|end|><|start|>assistant"


@pytest.mark.parametrize(
    "text,reasoning,content,calls",
    [
        # the recipient inside the channel's header, with a content type after it
        (
            '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"location":"NYC"}<|call|>',
            None,
            None,
            [("get_weather", {"location": "NYC"})],
        ),
        (
            _PLAN + '<|channel|>commentary to=functions.add <|constrain|>json<|message|>{"a": 1}<|call|>',
            "Plan.",
            None,
            [("add", {"a": 1})],
        ),
        # analysis, a preamble, two calls, the final answer: one turn
        (
            _PLAN
            + "<|channel|>commentary<|message|>Let me add.<|end|>"
            + '<|start|>assistant<|channel|>commentary to=functions.add <|constrain|>json<|message|>{"a": 1}<|call|>'
            + '<|start|>assistant to=functions.add<|channel|>commentary json<|message|>{"a": 2}<|call|>'
            + "<|start|>assistant<|channel|>final<|message|>Three.<|return|>",
            "Plan.",
            "Let me add.\nThree.",
            [("add", {"a": 1}), ("add", {"a": 2})],
        ),
        # two messages of content; a final message with a content type
        (
            "<|channel|>commentary<|message|>One.<|end|><|start|>assistant<|channel|>final<|message|>Two.<|end|>",
            None,
            "One.\nTwo.",
            [],
        ),
        ('<|channel|>final <|constrain|>json<|message|>{"ok": true}<|end|>', None, '{"ok": true}', []),
    ],
)
def test_gpt_oss_reads_a_turn_of_several_messages(text, reasoning, content, calls):
    message = _read("openai_gpt_oss_120b", text, tools=TOOLS)
    assert (message["reasoning_content"], message["content"]) == (reasoning, content)
    assert _calls(message) == calls


@pytest.mark.parametrize(
    "text",
    [
        # a header that never ends, an opener inside a call's arguments, a lone opener
        "<|channel|>commentary to=functions.add and then some",
        ' to=functions.add<|channel|>commentary json<|message|>{"a": "<|start|>assistant"}<|call|>',
        "Hello <|start|>assistant there",
    ],
)
def test_gpt_oss_what_is_no_message_stays_as_written(text):
    message = _read("openai_gpt_oss_120b", text, tools=TOOLS)
    if "<|call|>" in text:
        assert _calls(message) == [("add", {"a": "<|start|>assistant"})]
    else:
        assert message["tool_calls"] == [] and message["content"] == text.strip()


def test_gpt_oss_strict_reading_keeps_to_the_template_s_order():
    """The grammars keep to the template's form: strict reading does too."""
    module = _module("openai_gpt_oss_120b")
    reordered = '<|channel|>commentary to=functions.add <|constrain|>json<|message|>{"a": 1}<|call|>'
    with pytest.raises(ValueError):
        module.parse(reordered, strict=True)
    canonical = ' to=functions.add<|channel|>commentary json<|message|>{"a": 1}<|call|>'
    assert _calls(module.parse(canonical, strict=True)) == [("add", {"a": 1})]


def test_other_content_headers_end_as_headers_do():
    patched = _patched(
        "openai_gpt_oss_120b", "messages.content_also", ["<|channel|>commentary"], evidence="e"
    )
    with pytest.raises(SpecError, match=r"messages\.content_also\.0"):
        model.build(patched, slug="x", origin="x.yaml")


# -- a section opened otherwise, or not at all (tools.section.start_also) --------------------

_DSML_V32 = "deepseek_ai_deepseek_v3_2"
_DSML_V4 = ("deepseek_ai_deepseek_v4", "deepseek_ai_deepseek_v4_flash_0731")
_INVOKE = (
    '<｜DSML｜invoke name="add">\n<｜DSML｜parameter name="a" string="false">1'
    "</｜DSML｜parameter>\n</｜DSML｜invoke>\n"
)


def test_other_section_openers_need_the_section_opener_and_are_refused_naming_their_path():
    patched = _patched(_DSML_V32, "tools.section.start_also", [" "], evidence="e")
    with pytest.raises(SpecError, match=r"tools\.section\.start_also"):
        model.build(patched, slug="x", origin="x.yaml")
    with pytest.raises(SpecError, match="need evidence"):
        _patched(_DSML_V32, "tools.section.start_also", [""])
    # (Qwen3-Coder's calls have no section)
    patched = _patched("qwen3_coder", "tools.section", {"start": None, "end": None, "start_also": [""]}, evidence="e")
    with pytest.raises(SpecError, match=r"tools\.section\.start_also"):
        model.build(patched, slug="x", origin="x.yaml")


def test_a_section_left_out_is_looked_for_by_the_calls_start():
    calls = model.build(_spec(_DSML_V32), slug="x", origin="x.yaml").calls
    assert calls is not None
    assert calls.section_starts == ("<｜DSML｜function_calls>", "")
    assert calls.triggers_also == ('<｜DSML｜invoke name="',)


@pytest.mark.parametrize(
    "slug,section",
    [(_DSML_V32, ("<｜DSML｜function_calls>\n", "</｜DSML｜function_calls>"))]
    + [(slug, ("<｜DSML｜tool_calls>\n", "</｜DSML｜tool_calls>")) for slug in _DSML_V4],
)
@pytest.mark.parametrize(
    "before,opened,closed,content",
    [
        ("", True, True, None),  # the template's
        ("", False, False, None),  # vLLM's TestMissingFunctionCallsWrapper (V3.2)
        ("Sure.\n", False, False, "Sure."),
        ("", False, True, None),  # test_missing_tool_calls_wrapper_is_recovered (V4)
        ("Sure. ", False, True, "Sure."),
    ],
)
def test_deepseek_dsml_reads_calls_without_the_section_opener(slug, section, before, opened, closed, content):
    text = before + (section[0] if opened else "") + _INVOKE * 2 + (section[1] if closed else "")
    message = _read(slug, text, tools=TOOLS, enable_thinking=False)
    assert _calls(message) == [("add", {"a": 1})] * 2, text
    assert message["content"] == content


@pytest.mark.parametrize("slug", [_DSML_V32, *_DSML_V4])
@pytest.mark.parametrize(
    "text",
    [
        'Write <｜DSML｜invoke name="add"> to call it.',  # no call follows the opener
        '<｜DSML｜invoke name="add">\n<｜DSML｜parameter name="a" string="false">1',  # cut in a value
    ],
)
def test_deepseek_dsml_an_opener_with_no_call_after_it_is_content(slug, text):
    message = _read(slug, text, tools=TOOLS, enable_thinking=False)
    assert message["tool_calls"] == [] and message["content"] == text


def test_stepfun_reads_a_call_without_tool_call_before_it():
    call = "<function=add>\n<parameter=a>\n1\n</parameter>\n</function>"
    for text in (call, "Sure.\n" + call, "Sure.\n" + call + "\n</tool_call>"):
        message = _read("stepfun3_5_flash", "</think>" + text, tools=TOOLS)
        assert _calls(message) == [("add", {"a": 1})], text
        assert message["content"] == ("Sure." if text.startswith("Sure") else None)
