"""The build retries a template with the inputs it needs (issue 13, class 12), and no
value the analysis invented reaches a spec.

- A template that fails with the source's inputs, or renders the conversation without
  the user's message, is analysed again with the next of ``build.render_variants``: a
  placeholder for a tokenizer special token it reads (``sep_token``), message content
  as a list of text parts. The spec records the inputs used, the build log says why,
  and the generated parser reads what the template writes with them.
- A special token the source gives (a model directory's tokenizer_config.json) is
  passed as Hugging Face passes it; a placeholder that ends up in the format is refused,
  naming the field and the token to give.
- Where no variant works, the error is the template's own, with its file and line.
- A turn that repeats an input (the system message) before the content does not make
  that input a marker; the build refuses any format value that holds a probe value or
  a word of one, naming the field.

The templates are written here, not under tests/invented/ (those must round-trip in
tests/test_invented.py with the standard inputs).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import yaml

from compiler import samples
from compiler.build import analyze_source, build, probe_leaks, render_variants
from compiler.check import check
from compiler.loader import load_generated
from compiler.render import ChatTemplate, RenderInputs, RenderLimitExceeded, placeholder
from compiler.sources import SourceError, discover, one_source

# --------------------------------------------------------------------------- templates

# Refuses to render without the tokenizer's sep_token, which it writes after every
# message but the assistant's.
SEP_STRICT = """\
{%- if sep_token is not defined -%}
    {{- raise_exception('this template needs the tokenizer sep_token') -}}
{%- endif -%}
{%- for message in messages -%}
    {%- if message.role == 'assistant' -%}
        {{- '[[assistant]]\\n' + message.content + '[[done]]\\n' -}}
    {%- else -%}
        {{- '[[' + message.role + ']]\\n' + message.content + sep_token + '\\n' -}}
    {%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '[[assistant]]\\n' -}}{%- endif -%}
"""

# Ends every turn with the tokenizer's sep_token; ``strip`` fails on an undefined one.
SEP_ENDS_TURNS = """\
{%- for message in messages -%}
    {{- '[[' + message.role + ']]\\n' + message.content + sep_token.strip() + '\\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '[[assistant]]\\n' -}}{%- endif -%}
"""

# Reads content only as a list of parts: a string's characters have no .type, so with
# text content every message renders empty (no error, only a wrong render).
PARTS_LOOP = """\
{%- for message in messages -%}
    {{- '<|' + message.role + '|>\\n' -}}
    {%- if message.content -%}
        {%- for part in message.content if part.type == 'text' -%}{{- part.text -}}{%- endfor -%}
    {%- endif -%}
    {%- for call in message.tool_calls or [] -%}
        {%- set args = call.function.arguments -%}
        {{- '<call>{"name": ' + call.function.name | tojson + ', "arguments": ' -}}
        {{- (args if args is string else args | tojson) + '}</call>' -}}
    {%- endfor -%}
    {{- '<|end|>\\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|assistant|>\\n' -}}{%- endif -%}
"""

# Reads a user's content only as parts, an assistant's string as it is: with text
# content it shows the assistant's turn and no user text, as an ASR template does.
USER_PARTS = """\
{%- for message in messages -%}
    {{- '<|' + message.role + '|>\\n' -}}
    {%- if message.content is string and message.role == 'assistant' -%}
        {{- message.content -}}
    {%- elif message.content -%}
        {%- for part in message.content if part.type == 'text' -%}{{- part.text -}}{%- endfor -%}
    {%- endif -%}
    {{- '<|end|>\\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|assistant|>\\n' -}}{%- endif -%}
"""

# Indexes the first part: text content fails ('str object' has no attribute 'text').
PARTS_FIRST = """\
{%- for message in messages -%}
    {{- '<|' + message.role + '|>\\n' -}}
    {{- message.content[0].text + '<|end|>\\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|assistant|>\\n' -}}{%- endif -%}
"""

# Prints every parameter's description, trimmed.
PARAM_DESCRIPTIONS = """\
{%- if tools -%}
    {{- '<|tools|>\\n' -}}
    {%- for tool in tools -%}
        {{- tool.function.name + ': ' + tool.function.description | trim + '\\n' -}}
        {%- for name, param in tool.function.parameters.properties.items() -%}
            {{- '  ' + name + ' -- ' + param.description | trim + '\\n' -}}
        {%- endfor -%}
    {%- endfor -%}
    {{- '<|end|>\\n' -}}
{%- endif -%}
{%- for message in messages -%}
    {{- '<|' + message.role + '|>\\n' + (message.content or '') -}}
    {%- for call in message.tool_calls or [] -%}
        {%- set args = call.function.arguments -%}
        {{- '<call>{"name": ' + call.function.name | tojson + ', "arguments": ' -}}
        {{- (args if args is string else args | tojson) + '}</call>' -}}
    {%- endfor -%}
    {{- '<|end|>\\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|assistant|>\\n' -}}{%- endif -%}
"""

# Fails on line 3 whatever it is given.
BROKEN = """\
{%- for message in messages -%}
    {{- '<|' + message.role + '|>\\n' -}}
    {{- message.content.nope.deeper -}}
{%- endfor -%}
"""

# Echoes the system message at the head of every assistant turn, after its own marker.
ECHO_SYSTEM = """\
{%- set ns = namespace(system='') -%}
{%- if messages[0].role == 'system' -%}{%- set ns.system = messages[0].content -%}{%- endif -%}
{%- for message in messages -%}
    {%- if message.role == 'assistant' -%}
        {{- '<|assistant|>\\n<say>' + ns.system + ': ' + message.content + '</say><|end|>\\n' -}}
    {%- else -%}
        {{- '<|' + message.role + '|>\\n' + message.content + '<|end|>\\n' -}}
    {%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|assistant|>\\n' -}}{%- endif -%}
"""

# Ends every turn with a marker keyed by the first word of the first message: a word
# of our system message, not the whole of it, would be the end-of-turn marker.
KEYED_END = """\
{%- set key = messages[0].content.split()[0] -%}
{%- for message in messages -%}
    {{- '<|' + message.role + '|>\\n' + message.content + '<|end:' + key + '|>\\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|assistant|>\\n' -}}{%- endif -%}
"""

QUIET = {"log": lambda message: None}


# --------------------------------------------------------------------------- helpers


def build_one(tmp_path: Path, name: str, text: str, *, model_config: dict | None = None):
    """Build one template (a .jinja file, or a model directory with ``model_config`` as
    its tokenizer_config.json); returns (report, spec or None, module or None, log)."""
    templates = tmp_path / "templates"
    templates.mkdir(exist_ok=True)
    extra = []
    if model_config is None:
        (templates / f"{name}.jinja").write_text(text, encoding="utf-8")
    else:
        model = tmp_path / name
        model.mkdir()
        (model / "chat_template.jinja").write_text(text, encoding="utf-8")
        (model / "tokenizer_config.json").write_text(json.dumps(model_config), encoding="utf-8")
        extra.append(str(model))
    sources = discover(str(templates) if model_config is None else None, extra)
    lines: list[str] = []
    report = build(sources, str(tmp_path / "specs"), str(tmp_path / "generated"), log=lines.append)
    spec_path = tmp_path / "specs" / f"{name}.yaml"
    if report.failures:
        return report, None, None, lines
    spec = yaml.safe_load(spec_path.read_text(encoding="utf-8"))
    module = load_generated(tmp_path / "generated", name)
    return report, spec, module, lines


def output_of(spec: dict, text: str, message: dict, tools=None) -> str:
    """What the model writes for ``message``: the render of the conversation with it,
    past the prompt, rendered with the inputs the spec records."""
    template = ChatTemplate(text, "t.jinja", RenderInputs.from_spec(spec["render_inputs"]))
    history = [{"role": "user", "content": "What is the weather in Paris?"}]
    if spec["capabilities"]["system_role"]:
        history.insert(0, {"role": "system", "content": "You answer briefly."})
    prompt = template.render(history, tools=tools, add_generation_prompt=True)
    full = template.render([*history, message], tools=tools)
    assert full.startswith(prompt), (prompt, full)
    return full[len(prompt) :]


def no_probe_values(spec: dict) -> None:
    text = json.dumps(spec)
    for value in samples.PROBE_STRINGS + samples.PROBE_WORDS:
        assert value not in text


WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "The city."}},
            "required": ["city"],
        },
    },
}


def weather_call(city: str) -> dict:
    return {
        "id": "call00001",
        "type": "function",
        "function": {"name": "get_weather", "arguments": {"city": city}},
    }


# --------------------------------------------------------------------------- special tokens


def test_a_template_that_needs_sep_token_is_built_with_a_placeholder(tmp_path):
    report, spec, module, log = build_one(tmp_path, "sep_strict", SEP_STRICT)
    assert report.failures == []
    assert spec["render_inputs"]["special_tokens"] == {"sep_token": None}
    assert "content_as_parts" not in spec["render_inputs"]
    assert spec["end_of_turn"]["markers"] == ["[[done]]"]
    assert module.SPEC["render_inputs"]["special_tokens"] == {"sep_token": None}
    # The build log says which inputs, and why.
    (note,) = report.notes
    assert note.startswith(str(tmp_path / "templates" / "sep_strict.jinja"))
    assert "sep_token" in note and "needs the tokenizer sep_token" in note and "line 2" in note
    assert any(note in line for line in log)
    message = {"role": "assistant", "content": "It is sunny {and} 21 °C."}
    output = output_of(spec, SEP_STRICT, message)
    assert module.parse(output)["content"] == message["content"]
    no_probe_values(spec)


def test_a_sep_token_the_model_directory_gives_is_passed_and_read(tmp_path):
    config = {"sep_token": "[SEP]", "eos_token": "</s>", "pad_token": "<pad>"}
    report, spec, module, _ = build_one(tmp_path, "sep_model", SEP_ENDS_TURNS, model_config=config)
    assert report.failures == [] and report.notes == []
    # Only the tokens the template reads are recorded; the given one is not a placeholder.
    assert spec["render_inputs"]["special_tokens"] == {"sep_token": "[SEP]"}
    assert spec["end_of_turn"]["markers"] == ["[SEP]"]
    message = {"role": "assistant", "content": "Sunny."}
    output = output_of(spec, SEP_ENDS_TURNS, message)
    assert output.startswith("Sunny.[SEP]")
    assert module.parse(output)["content"] == "Sunny."


def test_check_names_a_changed_special_token(tmp_path):
    config = {"sep_token": "[SEP]"}
    build_one(tmp_path, "sep_model", SEP_ENDS_TURNS, model_config=config)
    model = tmp_path / "sep_model"
    specs_dir, generated = str(tmp_path / "specs"), str(tmp_path / "generated")
    assert check(specs_dir, generated, None, [str(model)]).problems == []
    (model / "tokenizer_config.json").write_text(json.dumps({"sep_token": "<sep>"}))
    (problem,) = check(specs_dir, generated, None, [str(model)]).problems
    assert "render inputs" in problem and "special_tokens" in problem


def test_a_placeholder_in_the_format_is_refused_naming_the_field_and_token(tmp_path):
    report, spec, _, _ = build_one(tmp_path, "sep_ends", SEP_ENDS_TURNS)
    assert spec is None
    (failure,) = report.failures
    assert failure.startswith(str(tmp_path / "templates" / "sep_ends.jinja"))
    assert "end_of_turn.markers.0 holds the placeholder for the tokenizer's sep_token" in failure
    assert "tokenizer_config.json" in failure


def test_special_tokens_come_from_the_manifest_and_are_checked(tmp_path):
    text = SEP_ENDS_TURNS
    (tmp_path / "sep_ends.jinja").write_text(text, encoding="utf-8")
    entry = {"sha256": hashlib.sha256(text.encode()).hexdigest()}
    corpus = {"package": "p", "version": "1", "sha256": "0" * 64, "member_dir": "t"}
    manifest = {"corpus": corpus, "templates": {"sep_ends.jinja": entry}}

    def write(inputs):
        entry["inputs"] = inputs
        (tmp_path / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")

    write({"special_tokens": {"sep_token": "</sep>"}})
    (source,) = discover(str(tmp_path))
    assert source.special_tokens == {"sep_token": "</sep>"}
    analyzed = analyze_source(source, time_budget=None)
    assert analyzed.note is None
    assert analyzed.analysis.body["end_of_turn"]["markers"] == ["</sep>"]
    write({"special_tokens": {"sepp_token": "</sep>"}})
    with pytest.raises(SourceError, match="unknown key 'sepp_token'"):
        discover(str(tmp_path))
    write({"special_tokens": {"sep_token": 1}})
    with pytest.raises(SourceError, match="special_tokens.sep_token must be a str"):
        discover(str(tmp_path))


def test_variants_are_tried_in_order_and_only_where_they_apply(tmp_path):
    path = tmp_path / "t.jinja"
    path.write_text(SEP_STRICT, encoding="utf-8")
    source = one_source(str(path))
    template = ChatTemplate(source.source, source.path)
    variants = render_variants(source, template)
    assert [(v.inputs.special_tokens, v.inputs.content_as_parts) for v in variants] == [
        ({}, False),
        ({"sep_token": None}, False),
        ({}, True),
        ({"sep_token": None}, True),
    ]
    path.write_text(PARTS_FIRST, encoding="utf-8")  # reads no special token
    source = one_source(str(path))
    variants = render_variants(source, ChatTemplate(source.source, source.path))
    assert [v.inputs.content_as_parts for v in variants] == [False, True]
    assert placeholder("sep_token") == "<|sep-token-placeholder|>"


# --------------------------------------------------------------------------- content as parts


def test_inputs_that_show_the_user_text_come_before_a_template_without_it(tmp_path):
    """A template that shows no user text is built with a warning, but only where no
    inputs show it: with content as parts this one is an ordinary chat template."""
    report, spec, module, _ = build_one(tmp_path, "user_parts", USER_PARTS)
    assert report.failures == [] and report.warnings == []
    assert spec["render_inputs"]["content_as_parts"] is True
    assert module.parse("Sunny.<|end|>")["content"] == "Sunny."


def test_a_template_that_reads_content_parts_is_built_with_them(tmp_path):
    report, spec, module, _ = build_one(tmp_path, "parts_loop", PARTS_LOOP)
    assert report.failures == []
    assert spec["render_inputs"]["content_as_parts"] is True
    assert module.SPEC["render_inputs"]["content_as_parts"] is True
    (note,) = report.notes
    assert "list of text parts" in note and "without the user's message" in note
    # Read with text content, the template showed no message at all: no system role,
    # no end-of-turn. With parts it is an ordinary format.
    assert spec["capabilities"]["system_role"] is True
    assert spec["end_of_turn"]["markers"] == ["<|end|>"]
    assert spec["tools"]["format"] == "json"
    message = {"role": "assistant", "content": "Sunny, 21 °C."}
    assert module.parse(output_of(spec, PARTS_LOOP, message))["content"] == message["content"]
    call = {"role": "assistant", "content": None, "tool_calls": [weather_call("Paris")]}
    parsed = module.parse(output_of(spec, PARTS_LOOP, call, tools=[WEATHER]), tools=[WEATHER])
    (got,) = parsed["tool_calls"]
    assert got["function"]["name"] == "get_weather"
    assert json.loads(got["function"]["arguments"]) == {"city": "Paris"}
    no_probe_values(spec)


def test_a_template_that_indexes_the_first_part_is_built_with_parts(tmp_path):
    report, spec, module, _ = build_one(tmp_path, "parts_first", PARTS_FIRST)
    assert report.failures == []
    assert spec["render_inputs"]["content_as_parts"] is True
    (note,) = report.notes
    assert "has no attribute 'text'" in note and "line 3" in note
    message = {"role": "assistant", "content": "Sunny."}
    assert module.parse(output_of(spec, PARTS_FIRST, message))["content"] == "Sunny."


def test_parameter_descriptions_are_given(tmp_path):
    """The analysis's tool definitions describe every function and parameter, so a
    template that prints them needs no variant."""
    report, spec, module, _ = build_one(tmp_path, "param_desc", PARAM_DESCRIPTIONS)
    assert report.failures == [] and report.notes == []
    assert spec["capabilities"]["tools"] is True
    call = {"role": "assistant", "content": "", "tool_calls": [weather_call("Oslo")]}
    output = output_of(spec, PARAM_DESCRIPTIONS, call, tools=[WEATHER])
    (got,) = module.parse(output, tools=[WEATHER])["tool_calls"]
    assert json.loads(got["function"]["arguments"]) == {"city": "Oslo"}
    for tool in samples.TOOLS_WIDE + [samples.TOOL]:
        for field in tool["function"]["parameters"]["properties"].values():
            assert field["description"]


def test_where_no_variant_works_the_error_names_the_template_and_line(tmp_path):
    report, spec, _, _ = build_one(tmp_path, "broken", BROKEN)
    assert spec is None
    (failure,) = report.failures
    path = str(tmp_path / "templates" / "broken.jinja")
    assert failure.startswith(f"{path}:3: ")
    assert "also tried: with message content as a list of text parts it fails (line 3" in failure


def test_a_limit_is_not_retried(tmp_path):
    path = tmp_path / "slow.jinja"
    path.write_text(
        "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
        encoding="utf-8",
    )
    with pytest.raises(RenderLimitExceeded) as raised:
        analyze_source(one_source(str(path)), time_budget=0.5)
    assert "time" in str(raised.value) and "also tried" not in str(raised.value)


def test_content_as_parts_converts_text_content_only():
    inputs = RenderInputs(content_as_parts=True)
    messages = [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": None, "tool_calls": []},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "t"}]},
    ]
    assert inputs.messages(messages) == [
        {"role": "user", "content": [{"type": "text", "text": "a"}]},
        {"role": "assistant", "content": None, "tool_calls": []},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "t"}]},
    ]
    assert messages[0]["content"] == "a"  # the caller's messages are left alone
    record = inputs.as_spec("openai")
    assert RenderInputs.from_spec(record) == inputs
    assert RenderInputs().as_spec("openai") == {
        "bos_token": None,
        "eos_token": None,
        "variables": {},
        "tool_shape": "openai",
    }


# --------------------------------------------------------------------------- probe values


def test_an_echoed_system_message_is_not_the_content_opener(tmp_path):
    report, spec, module, _ = build_one(tmp_path, "echo_system", ECHO_SYSTEM)
    assert report.failures == []
    assert spec["content"]["start"] == "<say>"
    assert spec["content"]["end"] == "</say>"
    assert [note["path"] for note in spec["review"]] == ["content.start"]
    no_probe_values(spec)
    message = {"role": "assistant", "content": "Sunny."}
    # The model repeats the system message; the parser cannot know it is not content.
    assert module.parse(output_of(spec, ECHO_SYSTEM, message))["content"] == (
        "You answer briefly.: Sunny."
    )


def test_a_word_of_a_probe_value_in_the_format_is_refused_naming_the_field(tmp_path):
    report, spec, _, _ = build_one(tmp_path, "keyed_end", KEYED_END)
    assert spec is None
    (failure,) = report.failures
    assert failure.startswith(str(tmp_path / "templates" / "keyed_end.jinja"))
    assert "end_of_turn.markers.0 holds the probe value 'Sysprobe'" in failure
    # An override can put the right value there: the check reads the resolved spec.
    spec_path = tmp_path / "specs" / "keyed_end.yaml"
    spec_path.write_text(
        "overrides:\n"
        "- {path: end_of_turn.markers, value: [], reason: the marker holds the first word}\n"
        "- {path: grammar.preserved_tokens, value: [], reason: likewise}\n",
        encoding="utf-8",
    )
    report, spec, _, _ = build_one(tmp_path, "keyed_end", KEYED_END)
    assert report.failures == [], report.failures
    assert spec["end_of_turn"]["markers"] == []


def test_probe_leaks_reads_the_format_not_the_metadata():
    spec = {
        "template": {"path": "Sysprobe.jinja"},
        "render_inputs": {"variables": {"v": samples.SYSTEM}},
        "content": {"start": "<x>" + samples.SYSTEM[:8], "end": None},
        "tools": {"call": {"start": "<|sep-token-placeholder|>"}},
        "grammar": {"preserved_tokens": ["ok", samples.FUNCTION]},
        "review": [{"path": "x", "message": samples.USER}],
        "overrides": [{"path": "x", "value": samples.USER, "reason": samples.USER}],
    }
    leaks = probe_leaks(spec)
    assert [leak.split(" holds ")[0] for leak in leaks] == [
        "content.start",
        "tools.call.start",
        "grammar.preserved_tokens.1",
    ]
    assert "the tokenizer's sep_token" in leaks[1]


def test_a_gguf_file_gives_its_special_tokens(tmp_path):
    gguf = pytest.importorskip("gguf")
    path = str(tmp_path / "sep-model.gguf")
    writer = gguf.GGUFWriter(path, "llama")
    writer.add_token_list(["<unk>", "<s>", "</s>", "<sep>", "<pad>"])
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_unk_token_id(0)
    writer.add_sep_token_id(3)
    writer.add_pad_token_id(4)
    writer.add_chat_template(SEP_ENDS_TURNS)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    (source,) = discover(None, [path])
    assert source.special_tokens == {"unk_token": "<unk>", "sep_token": "<sep>", "pad_token": "<pad>"}
    analyzed = analyze_source(source, time_budget=None)
    assert analyzed.note is None
    assert analyzed.inputs.special_tokens == {"sep_token": "<sep>"}  # the one it reads
    assert analyzed.analysis.body["end_of_turn"]["markers"] == ["<sep>"]
