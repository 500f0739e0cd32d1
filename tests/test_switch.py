"""The thinking switch (compiler/analyze/switch.py, capabilities.thinking_switch) on small
inline templates whose switch is plain from their text: found by what toggling it does
to the renders, never by its name; its polarity read off the renders; a boolean that
changes no generation prompt is no switch; the template's default read by rendering
with every switch undefined. The invented templates of the same classes, compiled and
parsed, are in tests/test_invented.py; the corpus, in tests/test_default_thinking.py."""

from __future__ import annotations

import pytest

from compiler.analyze import analyze, switch
from compiler.explain import explain
from compiler.probe import probe
from compiler.render import ChatTemplate

# Reasoning written back only where the template's own switch is on, which also adds a
# line to the system text (as Hermes 4's `thinking`); `tag` changes the generation
# prompt by nothing written around reasoning.
SWITCHED = """
{%- if deliberate %}<<sys>>Think in [M][/M] first.<</>>{% endif -%}
{%- for m in messages -%}
<<{{ m.role }}>>
{%- if m.role == 'assistant' and deliberate and m.reasoning_content -%}
[M]{{ m.reasoning_content }}[/M]
{%- endif -%}
{{ m.content }}<</>>
{%- endfor -%}
{%- if add_generation_prompt %}<<assistant>>{% if tag %}[{{ tag }}]{% endif %}{% endif -%}
"""


def found(source: str, name: str = "inline.jinja") -> switch.SwitchResult:
    return switch.analyze(ChatTemplate(source, name))


def test_a_switch_of_another_name_is_found_with_its_default():
    template = ChatTemplate(SWITCHED, "switched.jinja")
    result = switch.analyze(template)
    assert result.section == {
        "variables": {"deliberate": {"thinking_on": True, "thinking_off": False}},
        "default": "thinking_off",
    }
    # enable_thinking now stands for it, in every render (the probe's and the
    # analysis's too)
    assert template.thinking_switch == {True: {"deliberate": True}, False: {"deliberate": False}}
    caps = probe(template)
    assert caps.reasoning_field == "reasoning_content" and caps.thinking_toggle
    on_by_default = SWITCHED.replace("{%- if deliberate", "{%- if deliberate is not defined or deliberate")
    on_by_default = on_by_default.replace("and deliberate and", "and (deliberate is not defined or deliberate) and")
    assert found(on_by_default).section["default"] == "thinking_on"  # type: ignore[index]


def test_enable_thinking_is_recorded_with_its_default_too():
    """enable_thinking is a switch like any other: its default is read, not assumed."""
    own = SWITCHED.replace("deliberate", "enable_thinking")
    assert found(own).section == {
        "variables": {"enable_thinking": {"thinking_on": True, "thinking_off": False}},
        "default": "thinking_off",
    }
    on_by_default = own.replace("if enable_thinking", "if enable_thinking is not defined or enable_thinking")
    on_by_default = on_by_default.replace("and enable_thinking and", "and (enable_thinking is not defined or enable_thinking) and")
    assert found(on_by_default).section["default"] == "thinking_on"  # type: ignore[index]


def test_a_flag_that_changes_the_prompt_by_nothing_about_reasoning_is_no_switch():
    header = SWITCHED.replace("and deliberate and", "and").replace("{%- if deliberate %}", "{%- if 0 %}")
    assert found(header).section is None


# A block the prompt opens: <think> ... </think>; the switch closes it empty.
SKIP = """
{%- for m in messages -%}
<<{{ m.role }}>>
{%- if m.role == 'assistant' and m.reasoning_content %}<think>{{ m.reasoning_content }}</think>{% endif -%}
{{ m.content }}<</>>
{%- endfor -%}
{%- if add_generation_prompt %}<<assistant>>{% if SKIP %}<think></think>{% else %}<think>{% endif %}{% endif -%}
"""


@pytest.mark.parametrize("name", ["skip_reasoning", "enable_thinking", "no_think"])
def test_polarity_is_read_off_the_renders_not_the_name(name):
    """A switch whose true closes the block turns thinking off, whatever it is called:
    enable_thinking=True then renders it false (an enable_thinking written that way
    round too)."""
    template = ChatTemplate(SKIP.replace("SKIP", name), "skip.jinja")
    result = switch.analyze(template)
    assert result.section == {
        "variables": {name: {"thinking_on": False, "thinking_off": True}},
        "default": "thinking_on",
    }
    on = template.render([{"role": "user", "content": "hi"}], add_generation_prompt=True, enable_thinking=True)
    assert on.endswith("<<assistant>><think>")


# Past thoughts kept or dropped, a render for training: the generation prompt is the
# same either way, so the model is asked for the same thing.
KEEPS = """
{%- for m in messages -%}
<<{{ m.role }}>>
{%- if m.role == 'assistant' and m.reasoning_content and (FLAG) %}<think>{{ m.reasoning_content }}</think>{% endif -%}
{{ m.content }}<</>>
{%- endfor -%}
{%- if add_generation_prompt %}<<assistant>><think>{% endif -%}
"""


@pytest.mark.parametrize(
    "flag", ["keep_thinking", "preserve_thinking or loop.last", "is_training", "enable_thinking"]
)
def test_a_boolean_that_changes_no_generation_prompt_is_no_switch(flag):
    result = found(KEEPS.replace("FLAG", flag))
    assert result.section is None
    assert result.review == []


# Two switches of the template's own: one forces the reasoning message open, one skips
# to the answer's; with neither, the prompt stops at the role and the model picks.
PAIR = """
{%- for m in messages -%}
{%- if m.role == 'assistant' and m.reasoning_content -%}
<|turn|>assistant/think<|sep|>{{ m.reasoning_content }}<|end|>
{%- endif -%}
<|turn|>{{ m.role }}<|sep|>{{ m.content }}<|end|>
{%- endfor -%}
{%- if add_generation_prompt %}<|turn|>assistant
{%- if force_reasoning %}/think<|sep|>{% elif skip_reasoning %}<|sep|>{% endif %}{% endif -%}
"""


def test_a_pair_of_switches_forcing_and_skipping_is_found_and_undecided_without_either():
    template = ChatTemplate(PAIR, "pair.jinja")
    result = switch.analyze(template)
    # false, for either, renders as though it were not given: it belongs to neither setting
    assert result.section == {
        "variables": {"force_reasoning": {"thinking_on": True}, "skip_reasoning": {"thinking_off": True}},
        "default": "undecided",
    }
    history = [{"role": "user", "content": "hi"}]
    render = {value: template.render(history, add_generation_prompt=True, enable_thinking=value)
              for value in (True, False, None)}
    assert render[True].endswith("assistant/think<|sep|>")
    assert render[False].endswith("assistant<|sep|>")
    assert render[None].endswith("assistant")


UNDECIDED = """
{%- for m in messages -%}<<{{ m.role }}>>{{ m.content }}<</>>{%- endfor -%}
{%- if add_generation_prompt %}<<assistant>>
{%- if enable_thinking is defined and enable_thinking %}<think>
{%- elif enable_thinking is defined %}<think></think>{% endif %}{% endif -%}
"""


def test_a_default_that_is_neither_setting_is_undecided():
    result = found(UNDECIDED)
    assert result.section == {
        "variables": {"enable_thinking": {"thinking_on": True, "thinking_off": False}},
        "default": "undecided",
    }
    assert "reads an output both ways" in explain(result.evidence)


def test_a_default_the_template_refuses_to_render_is_undecided():
    raises = UNDECIDED.replace(
        "{%- elif enable_thinking is defined %}",
        "{%- elif enable_thinking is not defined %}{{ raise_exception('say it') }}{%- else %}",
    )
    result = found(raises)
    assert result.section["default"] == "undecided"  # type: ignore[index]
    assert "raises" in explain(result.evidence) and "say it" in explain(result.evidence)


def test_explain_shows_the_renders_the_switch_was_decided_by():
    """explain lists the switch's decisions with the renders compared: the variable's
    with its value on and off, the default's with the prompt rendered without it."""
    analysis = analyze(ChatTemplate(SKIP.replace("SKIP", "skip_reasoning"), "skip.jinja"))
    text = explain(analysis.evidence)
    assert "capabilities.thinking_switch.variables.skip_reasoning = " in text
    assert "capabilities.thinking_switch.default = 'thinking_on'" in text
    assert "prompt without skip_reasoning" in text and "skip_reasoning=True" in text
    assert "A only '</think>'" in text  # the difference itself, shown


# The reasoning is a message of its own (assistant/think); thinking on leaves the role
# named, thinking off writes the separator, which opens the answer's message.
ROLE_SEP = """
{%- for m in messages -%}
{%- if m.role == 'assistant' and m.reasoning_content -%}
<|turn|>assistant/think<|role_sep|>{{ m.reasoning_content }}<|turn_end|>
{% endif -%}
<|turn|>{{ m.role }}<|role_sep|>{{ m.content }}<|turn_end|>
{% endfor -%}
{%- if add_generation_prompt %}<|turn|>assistant
{%- if enable_thinking is defined and enable_thinking %}/think
{%- elif enable_thinking is defined %}<|role_sep|>{% endif %}{% endif -%}
"""


def test_a_thinking_off_prompt_ending_in_the_answer_s_opener_does_not_open_the_block():
    analysis = analyze(ChatTemplate(ROLE_SEP, "role_sep.jinja"))
    reasoning = analysis.body["reasoning"]
    assert reasoning["start"] == "<|role_sep|>"  # it opens the answer's message too
    assert reasoning["opened_by_prompt"]["thinking_off"] is False
    assert "opens the answer as well" in explain(analysis.evidence)
