"""Tag pairs a switch's prompt text names (issue 31, item 5; compiler/analyze/prose.py).

Granite 3.3's ``thinking`` adds only words to its system prompt: "Write your thoughts
between <think></think> and write your response between <response></response>". No
render shows either block; the pairs are read off the text the switch adds, the first
as the reasoning's, the second as the answer's wrapper (read where written, not
required). The outputs here are written by hand: the template renders none of them.
"""

from __future__ import annotations

import os

import pytest

from compiler import model
from compiler.analyze import prose
from compiler.build import analyze_source, spec_for
from compiler.codegen.module import load
from compiler.conversation import Conversation
from compiler.explain import explain
from compiler.loader import load_generated
from compiler.render import ChatTemplate
from compiler.sources import discover
from tests import roundtrip as rt
from tests.test_stream import chunkings, merge, stream

GRANITE = "ibm_granite_granite_3_3_2b_instruct"
INVENTED = os.path.join(rt.ROOT, "tests", "invented")


@pytest.fixture(scope="module")
def granite():
    return load_generated(os.path.join(rt.ROOT, "generated"), GRANITE)


# (output, reasoning, content): the output first.
GRANITE_OUTPUTS = [
    ("<think>I'm\nthinking</think>Hello, world!\nWhat's up?", "I'm\nthinking",
     "Hello, world!\nWhat's up?"),
    ("<think>I'm\nthinking</think><response>Hello, world!\nWhat's up?</response><|end_of_text|>",
     "I'm\nthinking", "Hello, world!\nWhat's up?"),
    ("<think>Plan.</think>\n\n<response>\nDone.\n</response>", "Plan.", "Done."),
    ("Hello, world!", None, "Hello, world!"),
    ("<response>Just the answer.</response>", None, "Just the answer."),
    ("Quote <response> in a sentence.", None, "Quote <response> in a sentence."),
]  # fmt: skip


def test_granite_spec_reads_the_pairs_its_prompt_names(granite):
    spec = granite.SPEC
    assert (spec["reasoning"]["mode"], spec["reasoning"]["start"], spec["reasoning"]["end"]) == (
        "tag", "<think>", "</think>")  # fmt: skip
    assert spec["reasoning"]["opened_by_prompt"] == {"thinking_on": False, "thinking_off": False}
    assert spec["content"] == {
        "mode": "wrapped_with_reasoning", "start": "<response>", "end": "</response>"}  # fmt: skip


@pytest.mark.parametrize("text,reasoning,content", GRANITE_OUTPUTS)
@pytest.mark.parametrize("thinking", [None, True, False])
def test_granite_outputs(granite, text, reasoning, content, thinking):
    message = granite.parse(text, enable_thinking=thinking)
    assert (message["reasoning_content"], message["content"]) == (reasoning, content)
    assert message["tool_calls"] == []
    for name, cuts in chunkings(text, text):
        fed, finished = stream(granite, text, cuts, enable_thinking=thinking)
        assert merge(fed + finished) == message, name


def test_granite_grammars_take_the_answer_with_its_wrapper_or_without(granite):
    """What the prompt asks for (the answer in <response>…</response> after the
    thoughts) and what models also write (the answer bare), both in llguidance's
    reading of the GBNF and of the Lark grammar."""
    from tests.test_grammar import accepts as gbnf_accepts
    from tests.test_lark import accepts as lark_accepts

    gbnf, lark = granite.grammar(enable_thinking=True), granite.lark_grammar(enable_thinking=True)
    for text, _, _ in GRANITE_OUTPUTS[:5]:
        assert gbnf_accepts(gbnf, text) and lark_accepts(lark, text), text


def _template(source: str) -> Conversation:
    return Conversation(ChatTemplate(source, "inline.jinja"), system_role=True)


# A template whose switch ``mode`` adds SAID to the system text it writes, and NOT to
# it with the switch off.
_SWITCHED = (
    "{{- '<|sys|>' -}}{%- if mode -%}{{- SAID -}}{%- else -%}{{- NOT -}}{%- endif -%}"
    "{{- '<|end|>' -}}{%- for m in messages -%}{{- '<|' + m.role + '|>' + m.content + '<|end|>' -}}"
    "{%- endfor -%}{%- if add_generation_prompt -%}{{- '<|assistant|>' -}}{%- endif -%}"
)


def _switched(said: str, off: str = "Answer plainly.") -> Conversation:
    return _template(_SWITCHED.replace("SAID", repr(said)).replace("NOT", repr(off)))


@pytest.mark.parametrize(
    "said,reasoning,answer",
    [
        ("Think in <think></think>, answer in <answer></answer>.", ("<think>", "</think>"),
         ("<answer>", "</answer>")),
        ("Reason inside [scratch]...[/scratch] first.", ("[scratch]", "[/scratch]"), None),
        ("Reason inside <|muse|>…<|/muse|> first.", ("<|muse|>", "<|/muse|>"), None),
    ],
)  # fmt: skip
def test_pairs_named_by_a_switch_of_any_name(said, reasoning, answer):
    named = prose.named_pairs(_switched(said), set())
    assert named is not None
    assert (named.variable, named.reasoning, named.answer) == ("mode", reasoning, answer)


@pytest.mark.parametrize(
    "said,off",
    [
        ("Use <b>bold</b> for names.", "Answer plainly."),  # text between: no pair named
        ("Think in <think> tags.", "Answer plainly."),  # an opener alone
        ("Use <a></a>, <b></b> and <c></c>.", "Answer plainly."),  # three: no such instruction
        ("Think in <think></think>.", "Never write <think></think>."),  # named either way
        ("Close turns with <|end|></|end|>.", "Answer plainly."),  # a marker of the format
    ],
)
def test_no_pair_where_the_text_names_none_of_its_own(said, off):
    talk = _switched(said, off)
    assert prose.named_pairs(talk, {"<|end|>"}) is None


def test_stated_tags_invented_template():
    """The invented stated_tags names [plan]...[/plan] and [reply]...[/reply] when its
    own ``reflective`` is on: the spec reads both, explain shows the prompts the
    reading came from, and outputs read as the prompt asks, calls too."""
    source = discover(None, [os.path.join(INVENTED, "stated_tags.jinja")])[0]
    spec, warnings = spec_for(source, [], "stated_tags.yaml", time_budget=None)
    assert warnings == []
    assert (spec["reasoning"]["mode"], spec["reasoning"]["start"], spec["reasoning"]["end"]) == (
        "tag", "[plan]", "[/plan]")  # fmt: skip
    assert spec["content"] == {
        "mode": "wrapped_with_reasoning", "start": "[reply]", "end": "[/reply]"}  # fmt: skip
    shown = explain(analyze_source(source, time_budget=None).analysis.evidence)
    assert "with reflective on the prompt adds text" in shown
    assert "(reflective=True)" in shown and "(reflective=False)" in shown

    parser = load(model.build(spec, slug="stated_tags", origin="stated_tags.yaml"))
    call = '<fn_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</fn_call>'
    for text, reasoning, content, calls in [
        ("[plan]Sunny?\nCheck.[/plan][reply]It is sunny.[/reply]<|turn_over|>", "Sunny?\nCheck.",
         "It is sunny.", 0),
        ("[plan]Sunny?[/plan]\nIt is sunny.", "Sunny?", "It is sunny.", 0),
        ("[plan]Need the weather.[/plan]" + call, "Need the weather.", None, 1),
        ("It is sunny.", None, "It is sunny.", 0),
    ]:  # fmt: skip
        message = parser.parse(text)
        found = (message["reasoning_content"], message["content"] or None)  # ("" before issue 31)
        assert found == (reasoning, content), text
        assert len(message["tool_calls"]) == calls, text
        for name, cuts in chunkings(text, text):
            fed, finished = stream(parser, text, cuts)
            assert merge(fed + finished) == message, (name, text)
