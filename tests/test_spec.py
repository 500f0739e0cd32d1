"""Tests for compiler/spec.py and schema/format-spec.schema.json."""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st

from compiler import spec
from compiler.spec import HEADER, MADE_BY, SpecError, apply_overrides, dump, load, read_overrides, validate

ORIGIN = "specs/foo.yaml"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# A real analysis body (compiler.analyze), as the build receives it.
BODY: dict[str, Any] = {
    "capabilities": {
        "system_role": True,
        "tools": True,
        "tool_calls": True,
        "tool_responses": True,
        "parallel_tool_calls": True,
        "tool_call_id": False,
        "tool_call_id_pattern": None,
        "object_arguments": True,
        "string_arguments": True,
        "requires_non_null_content": False,
        "typed_content_blocks": True,
        "reasoning_field": "reasoning_content",
        "thinking_toggle": False,
        "undeclared_variables": ["attrs", "fn"],
    },
    "reasoning": {
        "mode": "forced_open",
        "start": "<|open|>think<|sep|>",
        "end": "<|close|>think<|sep|>",
        "opened_by_prompt": {"thinking_on": True, "thinking_off": True},
    },
    "content": {
        "mode": "always_wrapped",
        "start": "<|open|>response<|sep|>",
        "end": "<|close|>response<|sep|>",
    },
    "tools": {"format": "none"},
    "end_of_turn": {"markers": ["<|close|>message<|sep|><|end_of_msg|>"], "tokenizer_eos": False},
    "grammar": {
        "triggers": [],
        "preserved_tokens": [
            "<|open|>think<|sep|>",
            "<|close|>think<|sep|>",
            "<|open|>response<|sep|>",
            "<|close|>response<|sep|>",
            "<|close|>message<|sep|><|end_of_msg|>",
        ],
    },
}

# Every tools section filled in, as the tool-call analysis will write it.
TOOLS: dict[str, Any] = {
    "format": "tagged",
    "section": {"start": None, "end": None},
    "call": {
        "start": "<tool_call>\n<function=",
        "parts": [
            {"hole": "name", "after": ">\n"},
            {"hole": "arguments", "after": "</function>\n</tool_call>"},
        ],
        "separator": "\n",
    },
    "arguments": {
        "encoding": "tagged",
        "literal": "python",
        "key_prefix": "<parameter=",
        "key_end": ">\n",
        "value_start": "",
        "value_suffix": "\n</parameter>\n",
        "separator": "",
    },
    "end_of_turn_after_calls": ["<|im_end|>"],
}


def full_spec(body=BODY, overrides=()) -> dict:
    return {
        "spec_version": 1,
        "compiler_version": "0.1.0",
        "template": {"path": "templates/foo.jinja", "sha256": "ab" * 32},
        "render_inputs": {
            "bos_token": None,
            "eos_token": "<|end_of_msg|>",
            "variables": {},
            "tool_shape": "openai",
        },
        **copy.deepcopy(body),
        "review": [{"path": "reasoning.start", "message": "check it"}],
        "overrides": list(overrides),
    }


def error_of(spec_dict) -> str:
    with pytest.raises(SpecError) as caught:
        validate(spec_dict, ORIGIN)
    message = str(caught.value)
    assert "\n" not in message
    return message


# --- schema ----------------------------------------------------------------------------


def test_schema_is_a_valid_2020_12_schema():
    schema = spec.load_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(schema)


def test_schema_closes_every_object():
    def objects(node):
        if isinstance(node, dict):
            if node.get("type") == "object":
                yield node
            for value in node.values():
                yield from objects(value)
        elif isinstance(node, list):
            for value in node:
                yield from objects(value)

    for node in objects(spec.load_schema()):
        # render_inputs.variables is free-form on purpose: template variables are.
        if "propertyNames" in node:
            continue
        assert node.get("additionalProperties") is False, node


def test_real_example_validates():
    validate(full_spec(), ORIGIN)


def test_full_tools_section_validates():
    validate(full_spec({**BODY, "tools": TOOLS}), ORIGIN)


def test_review_is_optional_and_nullable_markers_may_be_absent():
    spec_dict = full_spec()
    del spec_dict["review"]
    del spec_dict["reasoning"]["start"]
    del spec_dict["capabilities"]["tool_call_id_pattern"]
    validate(spec_dict, ORIGIN)


def test_unknown_key_names_its_path():
    spec_dict = full_spec()
    spec_dict["reasoning"]["colour"] = "blue"
    message = error_of(spec_dict)
    assert message.startswith(f"{ORIGIN}: reasoning.colour: unknown key")
    assert "mode" in message  # the allowed keys are listed


def test_unknown_top_level_key():
    spec_dict = full_spec()
    spec_dict["extra"] = 1
    assert error_of(spec_dict).startswith(f"{ORIGIN}: extra: unknown key")


def test_enum_violation_names_its_path():
    spec_dict = full_spec()
    spec_dict["reasoning"]["mode"] = "weird"
    assert error_of(spec_dict).startswith(f"{ORIGIN}: reasoning.mode: 'weird' is not one of [")


@pytest.mark.parametrize(
    "section, key, value",
    [
        ("content", "mode", "sometimes"),
        ("tools", "format", "xml"),
        ("capabilities", "reasoning_field", "thoughts"),
        ("render_inputs", "tool_shape", "anthropic"),
    ],
)
def test_every_mode_is_an_enum(section, key, value):
    spec_dict = full_spec()
    spec_dict[section][key] = value
    assert error_of(spec_dict).startswith(f"{ORIGIN}: {section}.{key}: {value!r} is not one of")


def test_list_items_are_named_by_index():
    spec_dict = full_spec()
    spec_dict["grammar"]["triggers"] = [
        {"type": "word", "value": "<tool_call>"},
        {"type": "regex", "value": "x"},
    ]
    assert error_of(spec_dict).startswith(f"{ORIGIN}: grammar.triggers.1.type: 'regex'")


def test_missing_required_key_names_it():
    spec_dict = full_spec()
    del spec_dict["end_of_turn"]["tokenizer_eos"]
    assert error_of(spec_dict) == f"{ORIGIN}: end_of_turn.tokenizer_eos: required key is missing"


def test_empty_marker_is_rejected():
    spec_dict = full_spec()
    spec_dict["content"]["end"] = ""
    assert error_of(spec_dict).startswith(f"{ORIGIN}: content.end: ")


def test_wrong_type_stays_one_line_and_short():
    spec_dict = full_spec()
    spec_dict["reasoning"] = ["a\nb"] * 200
    message = error_of(spec_dict)
    assert message.startswith(f"{ORIGIN}: reasoning: ")
    assert "is not of type 'object'" in message
    assert len(message) < 400


def test_tools_subsections_are_checked():
    tools = copy.deepcopy(TOOLS)
    tools["call"]["parts"][0]["hole"] = "in_the_middle"
    message = error_of(full_spec({**BODY, "tools": tools}))
    assert message.startswith(f"{ORIGIN}: tools.call.parts.0.hole: 'in_the_middle'")


def test_bad_override_entries_are_rejected_by_the_schema():
    spec_dict = full_spec(overrides=[{"path": "tools..x", "value": 1, "reason": "r"}])
    assert error_of(spec_dict).startswith(f"{ORIGIN}: overrides.0.path: ")
    spec_dict = full_spec(overrides=[{"path": "tools.format", "value": "json", "reason": " "}])
    assert error_of(spec_dict).startswith(f"{ORIGIN}: overrides.0.reason: ")


def test_first_error_in_file_order_is_reported():
    spec_dict = full_spec()
    spec_dict["grammar"]["triggers"] = "no"
    spec_dict["reasoning"]["mode"] = "weird"  # comes first in the file
    for _ in range(3):
        assert error_of(spec_dict).startswith(f"{ORIGIN}: reasoning.mode: ")


# --- dump and load ---------------------------------------------------------------------

HOSTILE = [
    "<｜end▁of▁sentence｜>",
    "<|im_end|>",
    "| not a block",
    "[TOOL_CALLS]",
    "key: value",
    "# not a comment",
    "'single' \"double\"",
    "back\\slash",
    "<tool_call>\n",
    "\ttab",
    "  leading and trailing  ",
    "\n\n",
    "yes",
    "null",
    "~",
    "0x1F",
    "- item",
    "&anchor *alias !tag %directive @ `",
    "\x85\u2028\u2029\ufeff\x00\x7f",
    "emoji 🙂 and \U0010fffd",
]


def spec_with_markers(markers: list[str]) -> dict:
    body = copy.deepcopy(BODY)
    body["reasoning"]["start"] = markers[0]
    body["content"]["end"] = markers[-1]
    body["end_of_turn"]["markers"] = list(markers)
    body["grammar"]["preserved_tokens"] = list(dict.fromkeys(markers))
    body["render_inputs"] = {"bos_token": markers[0], "variables": {"v": markers}}
    return full_spec(body)


def test_hostile_markers_round_trip_through_a_file(tmp_path):
    original = spec_with_markers(HOSTILE)
    path = tmp_path / "foo.yaml"
    path.write_text(dump(original), encoding="utf-8")
    assert load(path) == original


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(min_size=1), min_size=1, max_size=4))
@example(["a\n", " b ", "c\t\r\n"])
def test_any_marker_round_trips(markers):
    original = spec_with_markers(markers)
    assert yaml.safe_load(dump(original)) == original


def test_dump_keeps_key_order_and_writes_no_aliases():
    shared = ["<a>", "<b>"]
    body = copy.deepcopy(BODY)
    body["end_of_turn"]["markers"] = shared
    body["grammar"]["preserved_tokens"] = shared
    text = dump(full_spec(body))
    assert "&id" not in text and "*id" not in text
    top_keys = [line.split(":")[0] for line in text.splitlines() if line[:1].isalpha()]
    assert top_keys == list(full_spec())


def test_long_markers_do_not_wrap():
    marker = "<" + "word " * 60 + ">"
    text = dump(spec_with_markers([marker]))
    assert f"start: {marker}" in text


def test_control_characters_are_written_visibly():
    text = dump(spec_with_markers(["<tool_call>\n"]))
    assert 'start: "<tool_call>\\n"' in text


def test_dump_is_deterministic():
    assert dump(full_spec()) == dump(full_spec())


def test_header_is_at_the_top_and_says_how_the_spec_was_made():
    for made_by, says in (("build", "chatfmt build"), ("analyze", "chatfmt analyze")):
        text = dump(full_spec(), made_by=made_by)
        first = MADE_BY[made_by]
        assert text.startswith(first + HEADER)
        assert says in first.splitlines()[0]
        assert all(line.startswith("#") for line in (first + HEADER).splitlines())
        assert text[len(first + HEADER) :].startswith("spec_version: 1\n")
    assert "make specs" in MADE_BY["build"] and "no\n# overrides" in MADE_BY["analyze"]
    for word in ("overrides", "path", "value", "reason", "overwritten", "null"):
        assert word in HEADER


def test_load_rejects_invalid_yaml_naming_file_and_line(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("spec_version: 1\nreasoning: [unclosed\n", encoding="utf-8")
    with pytest.raises(SpecError) as caught:
        load(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: line ")
    assert "\n" not in message


def test_load_rejects_a_non_mapping(tmp_path):
    path = tmp_path / "list.yaml"
    path.write_text("- 1\n- 2\n", encoding="utf-8")
    with pytest.raises(SpecError, match=r"list\.yaml: .*mapping"):
        load(path)


def test_load_rejects_duplicate_keys(tmp_path):
    path = tmp_path / "dup.yaml"
    path.write_text("reasoning:\n  mode: tag\n  mode: none\n", encoding="utf-8")
    with pytest.raises(SpecError, match=r"dup\.yaml: line 3 .*duplicate key 'mode'"):
        load(path)


def test_load_names_a_missing_file(tmp_path):
    path = tmp_path / "absent.yaml"
    with pytest.raises(SpecError, match=r"absent\.yaml: cannot read"):
        load(path)


# Both loaders: libyaml's where PyYAML has it (what load uses), and the pure-Python one
# it falls back to.
LOADERS = [spec._Loader] + ([spec._CLoader] if yaml.__with_libyaml__ else [])


def test_load_uses_libyaml_where_pyyaml_has_it():
    if not yaml.__with_libyaml__:
        pytest.skip("this PyYAML is built without libyaml")
    assert issubclass(spec.LOADER, yaml.CSafeLoader)


@pytest.mark.parametrize("loader", LOADERS, ids=lambda loader: loader.__name__)
@pytest.mark.parametrize(
    "text, line",
    [
        ("reasoning:\n  mode: tag\n  mode: none\n", 3),
        ("spec_version: 1\nreasoning: {}\nspec_version: 1\n", 3),
        ("overrides:\n- path: a\n  value: 1\n  reason: r\n  value: 2\n", 5),
        ("review: [{path: a, message: b, path: c}]\n", 1),
        ("'mode': 1\n\"mode\": 2\n", 2),  # the same key, quoted two ways
    ],
)
def test_every_loader_rejects_duplicate_keys(tmp_path, monkeypatch, loader, text, line):
    monkeypatch.setattr(spec, "LOADER", loader)
    path = tmp_path / "dup.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SpecError, match=rf"dup\.yaml: line {line} .*duplicate key"):
        load(path)


@pytest.mark.parametrize("loader", LOADERS, ids=lambda loader: loader.__name__)
def test_every_loader_names_file_and_line_of_broken_yaml(tmp_path, monkeypatch, loader):
    monkeypatch.setattr(spec, "LOADER", loader)
    path = tmp_path / "broken.yaml"
    path.write_text("spec_version: 1\nreasoning: [unclosed\n", encoding="utf-8")
    with pytest.raises(SpecError, match=r"broken\.yaml: line 3 column 1: invalid YAML: "):
        load(path)


@pytest.mark.parametrize("loader", LOADERS, ids=lambda loader: loader.__name__)
def test_every_loader_reads_a_date_as_the_text_written(tmp_path, monkeypatch, loader):
    """YAML 1.1 makes an unquoted date a date, which is no JSON data: a spec keeps the
    text, and writes it back quoted (so it stays a string)."""
    monkeypatch.setattr(spec, "LOADER", loader)
    path = tmp_path / "dated.yaml"
    path.write_text("a: 2024-06-01\nb: 2001-12-14 21:59:43.10 -5\nc: '2024'\n", encoding="utf-8")
    read = load(path)
    assert read == {"a": "2024-06-01", "b": "2001-12-14 21:59:43.10 -5", "c": "2024"}
    assert yaml.safe_load(yaml.dump(read, Dumper=spec._Dumper)) == read


def test_a_value_that_is_no_json_data_is_refused_with_its_path():
    import datetime

    body = full_spec()
    body["render_inputs"]["variables"] = {"today": datetime.date(2024, 6, 1)}
    with pytest.raises(SpecError, match=r"^x\.yaml: render_inputs\.variables\.today: a date "):
        validate(body, "x.yaml")
    body["render_inputs"]["variables"] = {"items": [1, {"k": float("nan")}]}
    with pytest.raises(SpecError, match=r"^x\.yaml: render_inputs\.variables\.items\.1\.k: nan "):
        validate(body, "x.yaml")
    body["render_inputs"]["variables"] = {"text": "a\ud800b"}
    with pytest.raises(SpecError, match=r"variables\.text: 'a\\ud800b' holds a lone surrogate"):
        validate(body, "x.yaml")


def test_both_loaders_read_every_committed_spec_alike():
    paths = sorted(Path(ROOT, "specs").glob("*.yaml"))
    assert paths
    for path in paths:
        text = path.read_text(encoding="utf-8")
        fast = yaml.load(text, Loader=spec.LOADER)
        assert spec.same(fast, yaml.load(text, Loader=spec._Loader)), path
        assert dump(fast) == text, path  # and the dumper writes the file back as it is


def test_a_large_spec_loads_fast(tmp_path):
    """Nearly the largest spec there may be (spec.MAX_SPEC_BYTES), of review notes:
    libyaml reads it many times faster than the pure-Python loader (50 MB of long
    strings, before the bound: 31 s, with libyaml 0.7 s)."""
    if not yaml.__with_libyaml__:
        pytest.skip("this PyYAML is built without libyaml")
    big = full_spec()
    message = ("a long review note " * 330).strip()
    big["review"] = [{"path": f"reasoning.start.{n}", "message": message} for n in range(150)]
    # Written by hand: the pure-Python dumper would take longer than the test.
    notes = "".join(f"- path: {note['path']}\n  message: {message}\n" for note in big["review"])
    text = dump(full_spec()).replace(
        "review:\n- path: reasoning.start\n  message: check it\n", "review:\n" + notes
    )
    path = tmp_path / "big.yaml"
    path.write_text(text, encoding="utf-8")
    assert 900_000 < path.stat().st_size < spec.MAX_SPEC_BYTES
    # Read by libyaml (what it costs is the bench's to measure, not a test's: a timed
    # ratio failed on a loaded machine), and read right.
    assert issubclass(spec.LOADER, yaml.CSafeLoader)
    assert load(path) == big


# --- overrides -------------------------------------------------------------------------


def override(path, value, reason="reviewed against the template"):
    return {"path": path, "value": value, "reason": reason}


def test_scalar_replace_leaves_the_input_alone():
    before = copy.deepcopy(BODY)
    result, notes = apply_overrides(BODY, [override("reasoning.mode", "tag")], ORIGIN)
    assert result["reasoning"]["mode"] == "tag"
    assert result["reasoning"]["start"] == BODY["reasoning"]["start"]
    assert BODY == before
    assert notes == []


def test_whole_mapping_is_supplied():
    tools = {
        "format": "json",
        "call": {"start": "<tool_call>", "end": "</tool_call>", "separator": "\n"},
        "json": {"name": "name", "arguments": "arguments", "id": None, "name_is_key": False,
                 "literal": "json"},
    }
    result, _ = apply_overrides(BODY, [override("tools", tools)], ORIGIN)
    assert result["tools"] == tools
    validate(full_spec(result), ORIGIN)


def test_missing_mappings_are_created_along_the_path():
    result, _ = apply_overrides(BODY, [override("tools.function.name_suffix", ">")], ORIGIN)
    assert result["tools"] == {"format": "none", "function": {"name_suffix": ">"}}


def test_list_item_by_index():
    result, _ = apply_overrides(BODY, [override("grammar.preserved_tokens.1", "<x>")], ORIGIN)
    assert result["grammar"]["preserved_tokens"][1] == "<x>"
    assert result["grammar"]["preserved_tokens"][0] == BODY["grammar"]["preserved_tokens"][0]


def test_list_item_inside_a_list_item():
    body = copy.deepcopy(BODY)
    body["grammar"]["triggers"] = [{"type": "word", "value": "<tool_call>"}]
    result, _ = apply_overrides(body, [override("grammar.triggers.0.type", "pattern")], ORIGIN)
    assert result["grammar"]["triggers"] == [{"type": "pattern", "value": "<tool_call>"}]


def test_null_removes_a_key():
    result, _ = apply_overrides(BODY, [override("reasoning.start", None)], ORIGIN)
    assert "start" not in result["reasoning"]
    assert result["reasoning"]["end"] == BODY["reasoning"]["end"]
    validate(full_spec(result), ORIGIN)


def test_null_removes_a_list_item():
    result, _ = apply_overrides(BODY, [override("grammar.preserved_tokens.0", None)], ORIGIN)
    assert result["grammar"]["preserved_tokens"] == BODY["grammar"]["preserved_tokens"][1:]


def test_overrides_apply_in_order():
    result, _ = apply_overrides(
        BODY,
        [override("tools", {"format": "json"}), override("tools.format", "bare_json")],
        ORIGIN,
    )
    assert result["tools"] == {"format": "bare_json"}


def test_override_that_agrees_is_noted():
    overrides = [
        override("reasoning.mode", "forced_open"),
        override("reasoning.mode", "tag"),
        override("tools", {"format": "none"}),
        override("capabilities.tool_call_id_pattern", None),
        override("capabilities.tool_call_id", 0),  # 0 is not false
    ]
    _, notes = apply_overrides(BODY, overrides, ORIGIN)
    assert notes == [
        f"{ORIGIN}: override reasoning.mode agrees with the analysis and can be dropped",
        f"{ORIGIN}: override tools agrees with the analysis and can be dropped",
        f"{ORIGIN}: override capabilities.tool_call_id_pattern agrees with the analysis "
        "and can be dropped",
    ]


def test_value_is_copied_not_shared():
    value = {"format": "json"}
    result, _ = apply_overrides(BODY, [override("tools", value)], ORIGIN)
    result["tools"]["format"] = "bare_json"
    assert value == {"format": "json"}


@pytest.mark.parametrize(
    "entry, expected",
    [
        ("tools.format", r"overrides\.0: expected a mapping"),
        ({"value": 1, "reason": "r"}, r"overrides\.0\.path: None is not a dotted path"),
        (override("tools..format", "json"), r"overrides\.0\.path: 'tools\.\.format'"),
        (override("0.format", "json"), r"overrides\.0\.path: '0\.format'"),
        ({"path": "tools.format", "reason": "r"}, r"override tools\.format: missing value"),
        ({"path": "tools.format", "value": "json"}, r"override tools\.format: missing reason"),
        (override("tools.format", "json", ""), r"override tools\.format: reason must be"),
        (
            {**override("tools.format", "json"), "why": "x"},
            r"override tools\.format: unknown key 'why'",
        ),
        (
            override("grammar.preserved_tokens.9", "<x>"),
            r"override grammar\.preserved_tokens\.9: index 9 is out of range "
            r"\(grammar\.preserved_tokens has 5 items\)",
        ),
        (
            override("grammar.preserved_tokens.first", "<x>"),
            r"override grammar\.preserved_tokens\.first: grammar\.preserved_tokens is a list",
        ),
        (
            override("reasoning.mode.kind", "tag"),
            r"override reasoning\.mode\.kind: reasoning\.mode is a str, not a mapping",
        ),
        (
            override("capabilities.tool_call_id_pattern.x", "y"),
            r"override capabilities\.tool_call_id_pattern\.x: capabilities\.tool_call_id_pattern "
            r"is a null",
        ),
        (override("overrides.0", "x"), r"override overrides\.0: the overrides list"),
    ],
)
def test_malformed_override_raises_naming_the_path(entry, expected):
    with pytest.raises(SpecError, match=rf"^{ORIGIN}: {expected}"):
        apply_overrides(BODY, [entry], ORIGIN)


def test_overrides_must_be_a_list():
    with pytest.raises(SpecError, match=rf"^{ORIGIN}: overrides: expected a list"):
        apply_overrides(BODY, {"path": "tools"}, ORIGIN)


def patched_error(overrides) -> str:
    """What validate says of the spec those overrides make out of BODY."""
    result, _ = apply_overrides(BODY, overrides, ORIGIN)
    return error_of(full_spec(result, overrides))


def test_override_to_a_path_the_schema_forbids_is_named_by_validate():
    message = patched_error([override("tools.functon.name_suffix", ">")])
    assert message.startswith(f"{ORIGIN}: tools.functon: unknown key")
    assert message.endswith("(set by override tools.functon.name_suffix)")


def test_override_with_a_bad_value_is_named_by_validate():
    message = patched_error(
        [override("tools", {"format": "json", "call": {"start": 5, "separator": ""}})]
    )
    assert message.startswith(f"{ORIGIN}: tools.call.start: ")
    assert message.endswith("(set by override tools)")


def test_analysis_errors_are_not_blamed_on_unrelated_overrides():
    overrides = [override("content.mode", "plain")]
    body, _ = apply_overrides(BODY, overrides, ORIGIN)
    body["reasoning"]["mode"] = "weird"
    message = error_of(full_spec(body, overrides))
    assert "set by override" not in message


# --- read_overrides --------------------------------------------------------------------


def spec_file(tmp_path, spec_dict):
    path = tmp_path / "foo.yaml"
    path.write_text(dump(spec_dict), encoding="utf-8")
    return path


def test_read_overrides_without_a_file(tmp_path):
    assert read_overrides(tmp_path / "new.yaml") == []


def test_read_overrides_from_a_written_spec(tmp_path):
    overrides = [override("tools.format", "json"), override("reasoning.start", None)]
    assert read_overrides(spec_file(tmp_path, full_spec(overrides=overrides))) == overrides


def test_read_overrides_ignores_a_stale_body(tmp_path):
    spec_dict = full_spec(overrides=[override("tools.format", "json")])
    spec_dict["reasoning"]["retired_field"] = True
    assert read_overrides(spec_file(tmp_path, spec_dict)) == spec_dict["overrides"]


def test_read_overrides_when_the_spec_has_none(tmp_path):
    spec_dict = full_spec()
    del spec_dict["overrides"]
    assert read_overrides(spec_file(tmp_path, spec_dict)) == []


def test_read_overrides_rejects_a_malformed_entry(tmp_path):
    path = spec_file(tmp_path, full_spec(overrides=[{"path": "tools.format", "value": "json"}]))
    with pytest.raises(SpecError, match=r"foo\.yaml: overrides\.0\.reason: required key"):
        read_overrides(path)


def test_read_overrides_rejects_broken_yaml(tmp_path):
    path = tmp_path / "foo.yaml"
    path.write_text("overrides: [\n", encoding="utf-8")
    with pytest.raises(SpecError, match=r"foo\.yaml: line \d+"):
        read_overrides(path)


# --- resolve: a spec with its overrides in force (what `parse` reads) ------------------


def test_resolve_leaves_a_built_spec_as_it_is():
    built = full_spec(overrides=[override("reasoning.mode", "tag")])
    built["reasoning"]["mode"] = "tag"
    resolved, pending = spec.resolve(built, ORIGIN)
    assert (resolved, pending) == (built, False)


def test_resolve_applies_an_override_not_yet_built():
    edited = full_spec(overrides=[override("reasoning.opened_by_prompt.thinking_off", False)])
    resolved, pending = spec.resolve(edited, ORIGIN)
    assert pending
    assert resolved["reasoning"]["opened_by_prompt"] == {"thinking_on": True, "thinking_off": False}
    assert list(resolved) == list(edited)  # the file's order
    assert {k: v for k, v in resolved.items() if k != "reasoning"} == {
        k: v for k, v in edited.items() if k != "reasoning"
    }
    assert edited["reasoning"]["opened_by_prompt"]["thinking_off"] is True  # not changed


def test_resolve_tells_true_from_1():
    edited = full_spec(overrides=[override("end_of_turn.tokenizer_eos", 0)])
    with pytest.raises(SpecError, match="end_of_turn.tokenizer_eos"):
        spec.resolve(edited, ORIGIN)


@pytest.mark.parametrize(
    "entry, fragments",
    [
        (
            override("reasoning.opend_by_prompt", True),
            ["reasoning.opend_by_prompt", "unknown key", "set by override"],
        ),
        (override("reasoning.mode", "sometimes"), ["reasoning.mode", "'sometimes' is not one of"]),
        (override("end_of_turn.markers.7", "x"), ["override end_of_turn.markers.7", "out of range"]),
        (override("reasoning.mode.deeper", 1), ["override reasoning.mode.deeper", "not a mapping"]),
    ],
)
def test_resolve_refuses_a_bad_override_naming_file_and_path(entry, fragments):
    with pytest.raises(SpecError) as caught:
        spec.resolve(full_spec(overrides=[entry]), ORIGIN)
    message = str(caught.value)
    assert message.startswith(ORIGIN + ": ") and "\n" not in message
    for fragment in fragments:
        assert fragment in message


def test_resolve_takes_a_spec_that_removes_a_list_item_as_built():
    # Applying "remove item 0" again would remove another: it cannot tell, like check.
    built = full_spec(overrides=[override("grammar.preserved_tokens.0", None)])
    assert spec.resolve(built, ORIGIN) == (built, False)


def test_the_headers_example_override_is_one_a_spec_takes():
    """The override every spec's header shows as an example applies to a real spec
    and leaves it schema-valid (it once named a path the schema rejects)."""
    lines = [line.lstrip("# ").strip() for line in HEADER.splitlines()]
    path = next(line for line in lines if line.startswith("- path:")).split()[2]
    value = yaml.safe_load(next(line for line in lines if line.startswith("value:"))[6:])
    real = load("specs/qwen_qwen3_0_6b.yaml")
    body = {key: real[key] for key in ("reasoning", "content", "tools", "end_of_turn", "grammar")}
    patched, _ = apply_overrides(body, [{"path": path, "value": value, "reason": "r"}], ORIGIN)
    validate({**real, **patched}, ORIGIN)
