"""Real-output deviations that general rules of the runtime absorb, and bugs found
with them (issue 13, classes 9 and 11).

Hand-written model outputs, as llama.cpp's test suite writes them: each states what
``parse`` reads, and the stream, cut one character at a time, five at a time and
not at all, must merge into exactly that (DESIGN, the stream contract).

- whitespace between markers other than the template's: after a marker (a preserved
  token) inside a literal, any run of whitespace, or none, is read as the template's;
- reasoning left open and ended by the call trigger: the calls are read, the text
  before them is reasoning (where no closer follows them: issue 26);
- an end-of-turn marker the spec knows after the calls is dropped; one that ends in
  another end-of-turn marker also ends the turn without it (Cohere2MoE's
  '<|END_TEXT|>' before '<|END_OF_TURN_TOKEN|>');
- text between two blocks of calls: both blocks are read, the text is content; text
  before and after calls joins as it is written around them (no '\\n' put in);
- a section closer missing at the end of the text: the complete calls stand;
- a tagged value whose suffix is missing ends where the next unit's key starts.
"""

from __future__ import annotations

import json
import os
import shutil

import pytest

from compiler.build import build
from compiler.sources import discover
from tests import roundtrip as rt
from tests.test_stream import merge, streamed

CHUNKINGS = ("1-char", "5-char", "whole")


def _cuts(name: str, size: int):
    return {"1-char": range(1, size), "5-char": range(5, size, 5), "whole": []}[name]


def read(module, text: str, **options) -> dict:
    """``parse``'s message for ``text``, once the stream has given the same at every
    chunking."""
    if isinstance(module, str):
        module = rt.module(module)
    whole = module.parse(text, **options)
    for name in CHUNKINGS:
        fed, finished, abandoned = streamed(module, text, _cuts(name, len(text)), **options)
        assert merge(fed + finished, abandoned) == whole, name
    return whole


def calls(message: dict) -> list:
    return [
        (call["function"]["name"], json.loads(call["function"]["arguments"]))
        for call in message["tool_calls"]
    ]


def expect(message: dict, content: str | None = None, reasoning=None, called=()) -> None:
    assert message["content"] == content
    assert message["reasoning_content"] == reasoning
    assert calls(message) == list(called)


WEATHER = ("get_weather", {"city": "Paris"})
TIME = ("get_time", {"tz": "UTC"})
NEMO = "mistralai_mistral_nemo_instruct_2407"
R7B = "cohereforai_c4ai_command_r7b_12_2024_tool_use"
HERMES = "nousresearch_hermes_2_pro_llama_3_8b_tool_use"
QWEN3 = "qwen_qwen3_0_6b"
QWEN35 = "qwen3_5_4b"
CODER = "qwen3_coder"
V31 = "deepseek_ai_deepseek_v3_1"


def _nemo(*objects: str) -> str:
    return ", ".join(objects)


W_JSON = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
T_JSON = '{"name": "get_time", "arguments": {"tz": "UTC"}}'
R_JSON = '{"tool_name": "get_weather", "parameters": {"city": "Paris"}}'
HERMES_W = "<tool_call>\n" + W_JSON + "\n</tool_call>"
HERMES_T = "<tool_call>\n" + T_JSON + "\n</tool_call>"
CODER_W = (
    "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
    "</function>\n</tool_call>"
)
CODER_T = (
    "<tool_call>\n<function=get_time>\n<parameter=tz>\nUTC\n</parameter>\n"
    "</function>\n</tool_call>"
)
V31_BLOCK = (
    "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>"
    '{"city": "Paris"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>'
)


# --- whitespace between markers ------------------------------------------------------


@pytest.mark.parametrize(
    "slug,text,called",
    [
        # '[TOOL_CALLS][' written with a space after the marker
        (NEMO, "[TOOL_CALLS] [" + W_JSON + "]", [WEATHER]),
        (NEMO, "[TOOL_CALLS]\n[" + _nemo(W_JSON, T_JSON) + "]", [WEATHER, TIME]),
        # '<|START_ACTION|>[' written with a newline after the marker
        (R7B, "<|START_ACTION|>\n[\n    " + R_JSON + "\n]<|END_ACTION|>", [WEATHER]),
        (R7B, "<|START_ACTION|> [" + R_JSON + "]", [WEATHER]),
        # '<tool_call>\n<function=' written without its newline, or with two
        (CODER, CODER_W.replace("<tool_call>\n", "<tool_call>"), [WEATHER]),
        (CODER, CODER_W.replace("<tool_call>\n", "<tool_call>\n\n"), [WEATHER]),
    ],
)
def test_whitespace_after_a_marker(slug, text, called):
    expect(read(slug, text, enable_thinking=False), called=called)


def test_whitespace_where_a_marker_writes_none_is_not_tolerated():
    # Only where the literal writes whitespace, or between its markers:
    # '[TOOL_ CALLS]' is no marker, and the text stays content.
    text = "[TOOL_ CALLS][" + W_JSON + "]"
    expect(read(NEMO, text), content=text)


def test_a_marker_with_whitespace_and_text_after_it_is_content():
    text = "See [TOOL_CALLS] above."
    expect(read(NEMO, text), content=text)


# --- reasoning ended by the calls ----------------------------------------------------


@pytest.mark.parametrize(
    "slug,text,options,reasoning,called",
    [
        # the prompt opens '<think>' (thinking on); the model never closes it before its call
        (QWEN35, "Let me check the weather.\n\n" + CODER_W, {"enable_thinking": True},
         "Let me check the weather.", [WEATHER]),
        (QWEN35, "Two lookups.\n" + CODER_W + "\n" + CODER_T, {"enable_thinking": True},
         "Two lookups.", [WEATHER, TIME]),
        # the model opens it
        (QWEN3, "<think>\nI need the weather.\n" + HERMES_W, {}, "I need the weather.", [WEATHER]),
        (QWEN3, "<think>Two lookups.\n" + HERMES_W + "\n" + HERMES_T, {}, "Two lookups.", [WEATHER, TIME]),
        (V31, "I should look it up." + V31_BLOCK, {"enable_thinking": True}, "I should look it up.", [WEATHER]),
    ],
)
def test_reasoning_left_open_and_ended_by_calls(slug, text, options, reasoning, called):
    expect(read(slug, text, **options), reasoning=reasoning, called=called)


def test_a_trigger_in_reasoning_that_starts_no_call_is_reasoning():
    text = "<think>I could write <tool_call> here, but no.</think>It is sunny."
    expect(read(QWEN3, text), content="It is sunny.", reasoning=text[7 : text.index("</think>")])


def test_calls_after_the_reasoning_closer_are_read_as_before():
    text = "<think>Thinking.</think>\n\n" + HERMES_W
    expect(read(QWEN3, text), reasoning="Thinking.", called=[WEATHER])


def test_calls_that_the_reasoning_closer_follows_are_reasoning():
    # Issue 26, class 6: a call inside an open block, with the block's closer after
    # it, is text the model wrote while reasoning (it had ended the reasoning, and
    # the closer was left in the content).
    text = "<think>Thinking.\n" + HERMES_W + "\n</think>"
    expect(read(QWEN3, text), reasoning="Thinking.\n" + HERMES_W)


def test_strict_refuses_calls_before_the_reasoning_closer():
    with pytest.raises(ValueError):
        rt.module(QWEN3).parse("<think>Thinking.\n" + HERMES_W, strict=True)


# --- end-of-turn markers after the calls ---------------------------------------------


@pytest.mark.parametrize(
    "slug,text,called",
    [
        (HERMES, HERMES_W + "<|im_end|>", [WEATHER]),
        (HERMES, HERMES_W + "\n<|im_end|>\n", [WEATHER]),
        (CODER, CODER_W + "\n<|im_end|>", [WEATHER]),
        (R7B, "<|START_ACTION|>[" + R_JSON + "]<|END_ACTION|><|END_OF_TURN_TOKEN|>", [WEATHER]),
        (V31, V31_BLOCK + "<｜end▁of▁sentence｜>", [WEATHER]),
        # a bare JSON call (nothing marks it): the stream held it as content when the
        # end-of-turn marker came in pieces
        ("meta_llama_llama_3_1_8b_instruct", '{"name": "get_weather", "parameters": {"city": "Paris"}}<|eot_id|>', [WEATHER]),
        ("meta_llama_llama_3_1_8b_instruct", '{"name": "get_weather", "parameters": {"city": "Paris"}}\n<|eot_id|>', [WEATHER]),
    ],
)
def test_end_of_turn_after_the_calls(slug, text, called):
    expect(read(slug, text, enable_thinking=False), called=called)


@pytest.mark.parametrize("kind", ["tool_call", "parallel_tool_calls"])
def test_a_section_closer_the_empty_turn_writes_too(kind):
    """llama.cpp's DeepSeek R1 template writes a turn with no content as the calls'
    section, its closer too, even where there are no calls: the closer is found all
    the same, and the turn the template writes (its prompt opens the reasoning, so
    the model closes it first) reads back with nothing left in the content."""
    slug = "llama_cpp_deepseek_r1"
    spec = rt.load_spec(slug)
    kind = next(k for k in rt.TOOL_KINDS if k.name == kind)
    message = rt.message_for(spec, kind, "")
    tools = rt.template_tools(spec, rt.tool_definitions(kind))
    _, full = rt._render_pair(spec, rt.template_for(spec), message, kind, tools)
    assistant = "<｜Assistant｜>"
    text = "</think>" + full[full.rindex(assistant) + len(assistant) :]
    assert text.endswith("<｜tool▁calls▁end｜><｜end▁of▁sentence｜>")
    expect(read(slug, text), called=[(n, a) for n, a in kind.calls])


@pytest.fixture(scope="module")
def nemo_with_eos(tmp_path_factory):
    """Mistral Nemo built from a model directory whose tokenizer names its eos token
    ('</s>'): the spec then knows it as the end of turn."""
    template = os.path.join(rt.ROOT, "templates", "mistralai-Mistral-Nemo-Instruct-2407.jinja")
    if not os.path.isfile(template):
        pytest.skip("the template corpus is not fetched (make templates)")
    root = tmp_path_factory.mktemp("nemo")
    model = root / "mistral-nemo"
    model.mkdir()
    shutil.copy(template, model / "chat_template.jinja")
    (model / "tokenizer_config.json").write_text(json.dumps({"bos_token": "<s>", "eos_token": "</s>"}))
    build(discover(None, [str(model)]), str(root / "specs"), str(root / "generated"), log=lambda m: None)
    from compiler.loader import load_generated

    (path,) = [p for p in (root / "generated").glob("*.py") if not p.name.startswith("_")]
    module = load_generated(root / "generated", path.stem)
    assert module.STOP[0] == "</s>"  # (then the next messages' headers: no tokenizer)
    return module


@pytest.mark.parametrize(
    "text",
    [
        "[TOOL_CALLS][" + W_JSON + "]</s>",
        "[TOOL_CALLS] [" + W_JSON + "]\n</s>",
        "[TOOL_CALLS][" + W_JSON + "</s>",  # the list's closer missing too
    ],
)
def test_a_literal_eos_after_the_calls(nemo_with_eos, text):
    expect(read(nemo_with_eos, text), called=[WEATHER])


@pytest.mark.parametrize(
    "text,content",
    [
        ("Hello there<|END_TEXT|>", "Hello there"),
        ("Hello there<|END_TEXT|>\n", "Hello there"),
        ("Hello there<|END_TEXT|><|END_OF_TURN_TOKEN|>", "Hello there"),
        ("<|START_TEXT|>Hello there<|END_TEXT|>", "Hello there"),
    ],
)
def test_cohere2moe_content_that_stops_before_the_end_of_turn(text, content):
    # With thinking on the prompt opens the reasoning block; the output ends at
    # '<|END_TEXT|>' when the server stops on '<|END_OF_TURN_TOKEN|>'.
    expect(
        read("cohere2moe", "Thinking.<|END_THINKING|>" + text, enable_thinking=True),
        content=content,
        reasoning="Thinking.",
    )


def test_cohere2moe_knows_the_end_of_its_content_turn():
    assert "<|END_TEXT|>" in rt.module("cohere2moe").STOP


# --- text between calls, and around them ---------------------------------------------


@pytest.mark.parametrize(
    "slug,text,content,called",
    [
        (HERMES, HERMES_W + "\nsome text\n" + HERMES_T, "some text", [WEATHER, TIME]),
        (HERMES, HERMES_W + "some text" + HERMES_T, "some text", [WEATHER, TIME]),
        (
            HERMES,
            "Hello.\n" + HERMES_W + "\nsome text\n" + HERMES_T + "\nBye.",
            "Hello.\n\nsome text\n\nBye.",
            [WEATHER, TIME],
        ),
        (HERMES, HERMES_W + "\n<|im_end|>\n" + HERMES_T, None, [WEATHER, TIME]),
        (CODER, CODER_W + "\nNow the time.\n" + CODER_T + "<|im_end|>", "Now the time.", [WEATHER, TIME]),
        # a broken block between two good ones is content
        (
            HERMES,
            HERMES_W + "\n<tool_call>\n{broken\n</tool_call>\n" + HERMES_T,
            "<tool_call>\n{broken\n</tool_call>",
            [WEATHER, TIME],
        ),
    ],
)
def test_text_between_calls(slug, text, content, called):
    expect(read(slug, text, enable_thinking=False), content=content, called=called)


def test_strict_refuses_text_between_calls():
    with pytest.raises(ValueError):
        rt.module(HERMES).parse(HERMES_W + "\nsome text\n" + HERMES_T, strict=True)


@pytest.mark.parametrize(
    "text,content",
    [
        ("Before" + V31_BLOCK + "After", "BeforeAfter"),
        ("Before\n" + V31_BLOCK + "\nAfter", "Before\n\nAfter"),
        ("Before " + V31_BLOCK + "After", "Before After"),
        ("Before" + V31_BLOCK, "Before"),
        (V31_BLOCK + "\nAfter", "After"),
    ],
)
def test_text_before_and_after_calls_joins_as_written(text, content):
    expect(read(V31, text, enable_thinking=False), content=content, called=[WEATHER])


# --- a section closer missing at the end ---------------------------------------------


@pytest.mark.parametrize(
    "slug,text,content,called",
    [
        (NEMO, "[TOOL_CALLS][" + _nemo(W_JSON, T_JSON), None, [WEATHER, TIME]),
        # cut inside the second call: the first stands, the rest is content
        (NEMO, "[TOOL_CALLS][" + _nemo(W_JSON, T_JSON[:-4]), ", " + T_JSON[:-4], [WEATHER]),
        (R7B, "<|START_ACTION|>[\n    " + R_JSON, None, [WEATHER]),
        (V31, V31_BLOCK[: -len("<｜tool▁calls▁end｜>")], None, [WEATHER]),
    ],
)
def test_a_missing_section_closer(slug, text, content, called):
    expect(read(slug, text, enable_thinking=False), content=content, called=called)


# --- a tagged value whose suffix is missing ------------------------------------------

CODER_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "f",
            "parameters": {
                "type": "object",
                "properties": {"a": {"type": "string"}, "b": {"type": "integer"}},
            },
        },
    }
]


@pytest.mark.parametrize(
    "arguments,expected",
    [
        ("<parameter=a>\n1\n<parameter=b>\n2\n</parameter>\n", {"a": "1", "b": 2}),
        ("<parameter=a>\nx y\n\n<parameter=b>\n2\n</parameter>\n", {"a": "x y\n", "b": 2}),
        ("<parameter=a>\n1\n</parameter>\n<parameter=b>\n2\n</parameter>\n", {"a": "1", "b": 2}),
    ],
)
def test_a_new_parameter_ends_the_value_before_it(arguments, expected):
    text = "<tool_call>\n<function=f>\n" + arguments + "</function>\n</tool_call>"
    message = read(CODER, text, tools=CODER_TOOLS)
    expect(message, called=[("f", expected)])


def test_a_value_cut_at_the_next_parameter_without_tools():
    text = (
        "<tool_call>\n<function=f>\n<parameter=a>\n1\n<parameter=b>\n2\n</parameter>\n"
        "</function>\n</tool_call>"
    )
    expect(read(CODER, text), called=[("f", {"a": 1, "b": 2})])


# --- the runtime's rules, on markers set by hand -------------------------------------


@pytest.fixture
def markers(monkeypatch):
    """'<m>' and '[T]' are markers (preserved tokens), with fresh caches."""
    from compiler.runtime import text as T

    monkeypatch.setattr(T, "_TOKENS", ["<m>", "[T]"])
    monkeypatch.setattr(T, "_PIECES", {})
    monkeypatch.setattr(T, "_LOOSE", {})
    return T


@pytest.mark.parametrize(
    "literal,pieces",
    [
        ("[T][", ["[T]", "["]),
        ("<m>\n<f=", ["<m>", "<f="]),
        ("\n<m> x <m>\n", ["<m>", "x", "<m>"]),
        ("a b", ["a", "b"]),  # and at the whitespace it writes
        ("<f name=\"", ["<f", "name=\""]),
        ("  ", []),
    ],
)
def test_a_literal_is_cut_after_its_markers(markers, literal, pieces):
    assert markers._pieces(literal)[0] == pieces
    assert markers._head(literal) == (pieces[0] if pieces else "")


@pytest.mark.parametrize(
    "text,literal,end",
    [
        ("[T] [x", "[T][", 5),
        ("[T]\n\n[x", "[T][", 6),
        ("[T][x", "[T][", 4),
        ("<m><f=g", "<m>\n<f=", 6),
        ("<m> \t<f=g", "<m>\n<f=", 8),
        ("[ T][", "[T][", -1),
        ("x y", "x  y", 3),  # other whitespace where the literal writes some
        ("<fname=\"g", "<f name=\"", 8),  # or none
        ("<f  name=\"g", "<f name=\"", 10),
        ("<fn ame=\"g", "<f name=\"", -1),  # none where it writes none
    ],
)
def test_whitespace_after_a_marker_matches(markers, text, literal, end):
    assert markers._match(text, 0, literal) == end


@pytest.mark.parametrize(
    "text,literal,decided",
    [
        ("[T]", "[T][", False),
        ("[T] ", "[T][", False),  # more whitespace, or the '[', may follow
        ("[T] \n", "[T][", False),
        ("[T] [", "[T][", True),
        ("[T] x", "[T][", True),
        ("<m>\n<f", "<m>\n<f=", False),
        ("<m><f=", "<m>\n<f=", True),
        ("<f", "<f name=", False),  # ' name=' or 'name=' may follow
        ("<fn", "<f name=", False),
        ("<fx", "<f name=", True),
    ],
)
def test_decided_with_whitespace_after_a_marker(markers, text, literal, decided):
    assert markers._decided(text, literal) is decided


def test_decided_means_no_continuation_changes_the_match(markers):
    """The stream waits on _decided; what it then reads must be what _match reads
    of the whole text, however it goes on."""
    import itertools

    alphabet = ["[T]", "<m>", "[", "<", " ", "\n", "x"]
    for literal in ("[T][", "<m>\n<f=", " [T] <m>\n", "[T]", "< [T"):
        for size in range(4):
            for text in map("".join, itertools.product(alphabet, repeat=size)):
                if not markers._decided(text, literal):
                    continue
                for more in map("".join, itertools.product(alphabet, repeat=2)):
                    assert markers._match(text + more, 0, literal) == markers._match(text, 0, literal), (
                        text,
                        more,
                        literal,
                    )
