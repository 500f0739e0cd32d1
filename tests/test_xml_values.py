"""Values the templates write in XML's ways (issue 13, class 6): a string between
CDATA marks (MiniCPM 5), names and keys escaped as attributes are (Kimi K3, and an
invented template that escapes its values too), arrays and objects written as
elements (MiniMax M3).

The templates render the outputs, with arguments the round trip's never hold (``&``
in a key, ``]]>`` and the value's own closing tag inside a CDATA string, an object
holding a member named as itself); a few are the renders changed by hand as a model
may write them. Each must read back as the values given, by ``parse`` and by the
stream at every chunking.
"""

from __future__ import annotations

import json
import os

import pytest

from compiler.build import build
from compiler.loader import load_generated
from compiler.render import ChatTemplate, RenderInputs
from compiler.runtime.values import _unescaped
from compiler.sources import discover
from tests import roundtrip as rt
from tests.test_stream import chunkings, merge, streamed

MINICPM, KIMI, MINIMAX = "openbmb_minicpm5_1b", "kimi_k3", "minimax_m3"
RUN_CODE = [rt.TOOLS["run_code"]]


def render(slug: str, calls, *, reasoning: str | None = None, tools=RUN_CODE) -> str:
    """The model's text for an assistant turn with ``calls`` ((name, arguments)), as
    the template writes it after its generation prompt."""
    spec = rt.load_spec(slug)
    template = rt.template_for(spec)
    assert template is not None
    kind = rt.Kind("xml_values", "", reasoning=reasoning, calls=tuple(calls))
    message = rt.message_for(spec, kind, "")
    assert message is not None
    shaped = rt.template_tools(spec, tools)
    prefix = template.render(rt.history(spec), tools=shaped, add_generation_prompt=True)
    full = template.render(rt.history(spec) + [message], tools=shaped)
    assert full.startswith(prefix)
    return rt.cut_end_of_turn(full[len(prefix) :], rt.end_of_turn_markers(spec, template))


def read(module, text: str, tools=RUN_CODE) -> dict:
    """``parse(text)``, checked against the stream at every chunking."""
    whole = module.parse(text, tools=tools)
    for name, cuts in chunkings(text, text[-40:]):
        fed, finished, abandoned = streamed(module, text, cuts, tools=tools)
        assert merge(fed + finished, abandoned) == whole, name
    return whole


def calls(message: dict) -> list:
    return [
        (call["function"]["name"], json.loads(call["function"]["arguments"]))
        for call in message["tool_calls"]
    ]


def test_specs_record_how_the_templates_write_values():
    minicpm = rt.load_spec(MINICPM)["tools"]
    assert minicpm["arguments"]["verbatim"] == {"open": "<![CDATA[", "close": "]]>"}
    kimi = rt.load_spec(KIMI)["tools"]
    assert kimi["call"]["name_escapes"] == {"&": "&amp;", '"': "&quot;"}
    assert kimi["arguments"]["key_escapes"] == {"&": "&amp;", '"': "&quot;"}
    elements = rt.load_spec(MINIMAX)["tools"]["arguments"]["elements"]
    assert elements["item"] == "item" and elements["open"].endswith("<{key}>")
    for spec in (minicpm, kimi):
        assert "elements" not in spec["arguments"]


# -- CDATA (MiniCPM 5: a string holding <, & or a newline is written in CDATA) ------


def test_cdata_values_read_as_their_text():
    text = render(MINICPM, [("run_code", rt.TRICKY_ARGUMENTS)], reasoning="Run it.")
    assert "<![CDATA[import json" in text
    assert calls(read(rt.module(MINICPM), text)) == [("run_code", rt.TRICKY_ARGUMENTS)]


def test_cdata_holding_its_closer_and_the_value_suffix():
    arguments = {"code": "x = a[b[0]]>c\n</param> ]]> and </function>\nend", "stdin": "]]>"}
    text = render(MINICPM, [("run_code", arguments)], reasoning="Run it.")
    assert calls(read(rt.module(MINICPM), text)) == [("run_code", arguments)]


def test_cdata_types_by_the_schema_and_is_a_string_without_one():
    text = render(MINICPM, [("run_code", {"code": "1 < 2", "sandbox": True})], reasoning="Run.")
    text = text.replace(">True<", "><![CDATA[true]]><")
    module = rt.module(MINICPM)
    assert calls(read(module, text)) == [("run_code", {"code": "1 < 2", "sandbox": True})]
    assert calls(read(module, text, tools=None)) == [
        ("run_code", {"code": "1 < 2", "sandbox": "true"})
    ]


def test_values_without_cdata_still_read():
    arguments = {"code": "if a < b and c & d:\n    pass", "language": "python"}
    text = render(MINICPM, [("run_code", arguments)], reasoning="Run it.")
    plain = text.replace("<![CDATA[", "").replace("]]>", "")
    assert calls(read(rt.module(MINICPM), plain)) == [("run_code", arguments)]
    # whitespace between the closing mark and the value's closing tag
    spaced = text.replace("]]></param>", "]]>\n</param>")
    assert calls(read(rt.module(MINICPM), spaced)) == [("run_code", arguments)]


def test_unclosed_cdata_is_no_call():
    text = render(MINICPM, [("run_code", {"code": "a < b"})], reasoning="Run it.")
    broken = text.replace("]]>", "")
    message = read(rt.module(MINICPM), broken)
    assert message["tool_calls"] == []
    assert "<![CDATA[a < b</param>" in message["content"]


# -- attributes' escapes (Kimi K3 escapes & and " in the tool's name and the key) ---


def test_escaped_keys_read_back():
    arguments = {"a&b": "x", 'q"uote': 'say "hi" & <go>', "lit&amp;": 1, "code": "&amp;"}
    text = render(KIMI, [("run_code", arguments)])
    assert 'key="a&amp;b"' in text and 'key="lit&amp;amp;"' in text
    assert calls(read(rt.module(KIMI), text)) == [("run_code", arguments)]


def test_escaped_name_reads_back():
    name = 'fetch&"go'
    tool = {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
    text = render(KIMI, [(name, {"url": "a&b"})], tools=[tool])
    assert 'tool="fetch&amp;&quot;go"' in text
    assert calls(read(rt.module(KIMI), text, tools=[tool])) == [(name, {"url": "a&b"})]


def test_unescaped_reads_each_escape_once():
    escapes = {"&amp;": "&", "&quot;": '"'}
    assert _unescaped("a&amp;quot;b&quot;&amp;&lt;", escapes) == 'a&quot;b"&&lt;'


# -- elements (MiniMax M3 writes arrays and objects as elements) ---------------------


def _without_nulls(arguments: dict) -> dict:
    return {key: value for key, value in arguments.items() if value is not None}


def test_elements_read_as_arrays_and_objects():
    text = render(MINIMAX, [("run_code", rt.TRICKY_ARGUMENTS)])
    expected = _without_nulls(rt.TRICKY_ARGUMENTS)  # the template leaves nulls out
    module = rt.module(MINIMAX)
    assert calls(read(module, text)) == [("run_code", expected)]
    # Without the schema, the elements are still an array and an object.
    assert calls(read(module, text, tools=None)) == [("run_code", expected)]


def test_elements_that_repeat_the_key_around_them():
    arguments = {
        "options": {"options": {"options": [1, 2.5]}, "env": {"env": "x"}},
        "args": [["a", "b"], ["c"], []],
        "code": "print(1)",
    }
    expected = dict(arguments, args=[["a", "b"], ["c"], ""])  # [] is written as nothing
    text = render(MINIMAX, [("run_code", arguments)])
    assert calls(read(rt.module(MINIMAX), text)) == [("run_code", expected)]


def test_elements_with_text_beside_them_read_as_written():
    text = render(MINIMAX, [("run_code", {"args": ["a", "b"], "code": "x"})])
    marks = "]<]minimax[>["
    broken = text.replace(f"b{marks}</item>", f"b{marks}</item>junk", 1)
    assert broken != text
    (call,) = calls(read(rt.module(MINIMAX), broken))
    assert call[1]["code"] == "x"
    assert call[1]["args"] == f"{marks}<item>a{marks}</item>{marks}<item>b{marks}</item>junk"


def test_elements_where_the_schema_says_string_read_as_written():
    tool = json.loads(json.dumps(rt.TOOLS["run_code"]))
    tool["function"]["parameters"]["properties"]["args"] = {"type": "string"}
    text = render(MINIMAX, [("run_code", {"args": ["a"]})], tools=[tool])
    (call,) = calls(read(rt.module(MINIMAX), text, tools=[tool]))
    assert call[1]["args"].endswith("<item>a]<]minimax[>[</item>")


# -- an invented template that escapes names, keys and values alike -----------------

ESCAPING = """\
{%- macro esc(text) -%}
{{- text|string|replace('&', '&amp;')|replace('<', '&lt;')|replace('>', '&gt;')|replace('"', '&quot;') -}}
{%- endmacro -%}
{{- '<turn role="system">\\n' + (messages[0].content if messages[0].role == 'system' else '') -}}
{%- if tools -%}{{- '\\n<toolbox>' + tools | tojson + '</toolbox>' -}}{%- endif -%}
{{- '</turn>\\n' -}}
{%- for message in messages -%}
    {%- if message.role == 'assistant' -%}
        {{- '<turn role="assistant">\\n' + (message.content or '') -}}
        {%- for call in message.tool_calls or [] -%}
            {{- '<use tool="' + esc(call.function.name) + '">' -}}
            {%- for key, value in call.function.arguments.items() -%}
                {{- '\\n<with key="' + esc(key) + '">' -}}
                {{- esc(value if value is string else value | tojson) -}}
                {{- '</with>' -}}
            {%- endfor -%}
            {{- '\\n</use>' -}}
        {%- endfor -%}
        {{- '</turn>\\n' -}}
    {%- elif message.role == 'tool' -%}
        {{- '<turn role="observation">\\n' + message.content + '</turn>\\n' -}}
    {%- elif message.role == 'user' or not loop.first -%}
        {{- '<turn role="' + message.role + '">\\n' + message.content + '</turn>\\n' -}}
    {%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<turn role="assistant">\\n' -}}{%- endif -%}
"""


@pytest.fixture(scope="module")
def escaping(tmp_path_factory):
    """The invented template compiled: (its spec, its module, the template)."""
    root = tmp_path_factory.mktemp("escaping")
    (root / "templates").mkdir()
    (root / "templates" / "escaping_xml.jinja").write_text(ESCAPING, encoding="utf-8")
    build(discover(str(root / "templates")), str(root / "specs"), str(root / "generated"),
          log=lambda message: None)  # fmt: skip
    module = load_generated(root / "generated", "escaping_xml")
    template = ChatTemplate(ESCAPING, "escaping_xml.jinja", RenderInputs(None, None, {}))
    return module.SPEC, module, template


def test_escaped_values_read_back(escaping):
    spec, module, template = escaping
    escapes = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}
    assert spec["tools"]["call"]["name_escapes"] == escapes
    assert spec["tools"]["arguments"]["key_escapes"] == escapes
    assert spec["tools"]["arguments"]["value_escapes"] == escapes
    arguments = {
        "code": 'if a < b && c > "d":\n    print("&amp;")',
        "k&<y>": "</with>",
        "options": {"quote": '"', "n": [1, "<2>"]},
    }
    message = {"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": "run&code", "arguments": arguments}}
    ]}  # fmt: skip
    history = [{"role": "user", "content": "Go."}]
    prefix = template.render(history, tools=RUN_CODE, add_generation_prompt=True)
    full = template.render(history + [message], tools=RUN_CODE)
    text = full[len(prefix) :]
    assert "&lt;/with&gt;" in text
    tools = [dict(RUN_CODE[0], function=dict(RUN_CODE[0]["function"], name="run&code"))]
    for given in (tools, None):
        assert calls(read(module, text, tools=given)) == [("run&code", arguments)]


def test_no_other_corpus_spec_says_so():
    """Only the templates that write values in these ways record them (Ministral 3
    escapes the name: it adds it to the Markup that ``tojson`` returns)."""
    found = {}
    for slug in rt.slugs():
        tools = rt.load_spec(slug).get("tools") or {}
        fields = {
            name
            for section in (tools.get("call") or {}, tools.get("arguments") or {})
            for name in ("name_escapes", "key_escapes", "value_escapes", "verbatim", "elements")
            if name in section
        }
        if fields:
            found[slug] = sorted(fields)
    assert found == {
        MINICPM: ["verbatim"],
        KIMI: ["key_escapes", "name_escapes"],
        MINIMAX: ["elements"],
        "mistralai_ministral_3_14b_reasoning_2512": ["name_escapes"],
    }
    assert os.path.exists(os.path.join(rt.SPECS, f"{MINICPM}.yaml"))
