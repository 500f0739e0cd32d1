"""Capability probes (compiler/probe.py) on two hand-written templates whose abilities
are plain from their text: one that reads every input a conversation may hold, one that
reads only user and assistant text. Each capability is asserted on both, so each probe
is seen to say yes and no."""

from __future__ import annotations

import pytest

from compiler.probe import probe
from compiler.render import ChatTemplate

# Reads a system role, tools, calls (arguments only as an object, ids of nine
# characters only, several per turn), tool results, typed text parts, reasoning in
# ``thought``, and answers enable_thinking.
READS_ALL = """
{%- for m in messages -%}
<<{{ m.role }}>>
{%- if m.thought %}[T]{{ m.thought }}[/T]{% endif -%}
{%- if m.content is string %}{{ m.content }}
{%- elif m.content %}{% for p in m.content %}{{ p.text }}{% endfor %}{% endif -%}
{%- for c in m.tool_calls or [] -%}
{%- if c.id is not string or c.id|length != 9 %}{{ raise_exception('bad id') }}{% endif -%}
CALL {{ c.function.name }} {{ c.id }}
{%- for k, v in c.function.arguments.items() %} {{ k }}={{ v }}{% endfor -%}
{%- endfor -%}
<</>>
{%- endfor -%}
{%- if tools %}TOOLS{% for t in tools %} {{ t.function.name }}{% endfor %}{% endif -%}
{%- if add_generation_prompt %}<<assistant>>
{%- if enable_thinking is defined and not enable_thinking %}[T][/T]{% endif %}{% endif -%}
"""

# Only user and assistant turns with text; anything else raises.
READS_LITTLE = """
{%- for m in messages -%}
{%- if m.role not in ['user', 'assistant'] %}{{ raise_exception('roles') }}{% endif -%}
<<{{ m.role }}>>{{ m.content }}<</>>
{%- endfor -%}
{%- if add_generation_prompt %}<<assistant>>{% endif -%}
"""


@pytest.fixture(scope="module")
def caps():
    return {
        name: probe(ChatTemplate(source, f"{name}.jinja")).as_dict()
        for name, source in (("all", READS_ALL), ("little", READS_LITTLE))
    }


@pytest.mark.parametrize(
    "capability, reads_all, reads_little",
    [
        ("system_role", True, False),
        ("tools", True, False),
        ("tool_calls", True, False),
        ("tool_responses", True, False),
        ("parallel_tool_calls", True, False),
        ("tool_call_id", True, False),
        ("tool_call_id_pattern", "[a-zA-Z0-9]{9}", None),
        ("object_arguments", True, False),
        ("string_arguments", False, False),
        ("typed_content_blocks", True, False),
        ("reasoning_field", "thought", None),
        ("thinking_toggle", True, False),
    ],
)
def test_each_probe_says_what_the_template_reads(caps, capability, reads_all, reads_little):
    assert caps["all"][capability] == reads_all
    assert caps["little"][capability] == reads_little


def test_a_template_that_prints_none_content_requires_non_null_content():
    prints_none = READS_ALL.replace(
        "{%- if m.content is string %}",
        "{{ m.content if m.content is none }}{%- if m.content is string %}",
    )
    assert probe(ChatTemplate(prints_none, "none.jinja")).requires_non_null_content
    assert not probe(ChatTemplate(READS_ALL, "all.jinja")).requires_non_null_content


def test_reasoning_content_is_preferred_where_the_template_reads_several_fields():
    both = READS_ALL.replace("[T]{{ m.thought }}", "[T]{{ m.thought }}{{ m.reasoning_content }}")
    both = both.replace("{%- if m.thought %}", "{%- if m.thought or m.reasoning_content %}")
    assert probe(ChatTemplate(both, "both.jinja")).reasoning_field == "reasoning_content"


def test_a_template_that_prints_arguments_as_they_come_takes_both_forms():
    as_given = READS_ALL.replace(
        "{%- for k, v in c.function.arguments.items() %} {{ k }}={{ v }}{% endfor -%}",
        " {{ c.function.arguments }}",
    )
    assert as_given != READS_ALL
    caps = probe(ChatTemplate(as_given, "as_given.jinja"))
    assert caps.string_arguments and caps.object_arguments


def test_a_template_that_writes_arguments_as_json_takes_objects_only():
    """``arguments | tojson`` writes an object as JSON but JSON text as a JSON string
    of it: arguments given as text are not shown as the model writes them."""
    as_json = READS_ALL.replace(
        "{%- for k, v in c.function.arguments.items() %} {{ k }}={{ v }}{% endfor -%}",
        " {{ c.function.arguments | tojson }}",
    )
    assert as_json != READS_ALL
    caps = probe(ChatTemplate(as_json, "as_json.jinja"))
    assert caps.object_arguments and not caps.string_arguments
