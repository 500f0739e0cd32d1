"""compiler/runtime/prepare.py: each rewrite of prepare_messages, on formats set by
patching the module's constants; expected shapes are OpenAI's and the seeds'
(a thinking block, a thoughts block, a user turn for a result), written by hand."""

from __future__ import annotations

import json

import pytest

from compiler.runtime import prepare as P

ANSWER = {"role": "assistant", "reasoning_content": "musing", "content": "answer"}
CALL = {
    "id": "c1",
    "type": "function",
    "function": {"name": "f", "arguments": '{"a": 1}'},
}


def _set(monkeypatch, **constants):
    for name, value in constants.items():
        monkeypatch.setattr(P, name, value)


def test_nothing_to_rewrite_gives_an_equal_copy():
    messages = [{"role": "system", "content": "s"}, ANSWER]
    prepared = P.prepare_messages(messages)
    assert prepared == messages and prepared[1] is not messages[1]


def test_reasoning_to_another_field(monkeypatch):
    _set(monkeypatch, PREPARE_REASONING_FIELD="thought")
    (out,) = P.prepare_messages([ANSWER])
    assert out == {"role": "assistant", "thought": "musing", "content": "answer"}
    assert P.prepare_messages([ANSWER], reasoning=False) == [ANSWER]


def test_reasoning_to_a_typed_block(monkeypatch):
    _set(monkeypatch, PREPARE_REASONING_BLOCK=("thoughts", "text"))
    (out,) = P.prepare_messages([ANSWER])
    assert out["content"] == [
        {"type": "thoughts", "text": "musing"},
        {"type": "text", "text": "answer"},
    ]
    assert "reasoning_content" not in out


def test_reasoning_into_the_content_between_the_markers(monkeypatch):
    _set(
        monkeypatch,
        PREPARE_REASONING_IN_CONTENT=True,
        REASONING_START="<r>",
        REASONING_END="</r>",
    )
    (out,) = P.prepare_messages([ANSWER])
    assert out["content"] == "<r>musing</r>answer"


@pytest.mark.parametrize("form, expected", [("object", {"a": 1}), ("string", '{"a": 1}')])
def test_arguments_in_the_form_the_template_reads(monkeypatch, form, expected):
    _set(monkeypatch, PREPARE_ARGUMENTS=form)
    as_object = dict(CALL, function={"name": "f", "arguments": {"a": 1}})
    for call in (CALL, as_object):
        (out,) = P.prepare_messages([{"role": "assistant", "content": None, "tool_calls": [call]}])
        assert out["tool_calls"][0]["function"]["arguments"] == expected


def test_arguments_that_are_no_json_stay_text(monkeypatch):
    _set(monkeypatch, PREPARE_ARGUMENTS="object")
    bad = dict(CALL, function={"name": "f", "arguments": "{oops"})
    (out,) = P.prepare_messages([{"role": "assistant", "content": "", "tool_calls": [bad]}])
    assert out["tool_calls"][0]["function"]["arguments"] == "{oops"


def test_null_content_and_typed_content(monkeypatch):
    _set(monkeypatch, PREPARE_NON_NULL_CONTENT=True, PREPARE_TYPED_CONTENT=True)
    out = P.prepare_messages(
        [{"role": "user", "content": "q"}, {"role": "assistant", "content": None}]
    )
    assert out[0]["content"] == [{"type": "text", "text": "q"}]
    assert out[1]["content"] == [{"type": "text", "text": ""}]


def test_system_joins_the_first_user_turn(monkeypatch):
    _set(monkeypatch, PREPARE_SYSTEM=True)
    out = P.prepare_messages(
        [
            {"role": "system", "content": "rules"},
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": "a"},
        ]
    )
    assert out == [
        {"role": "user", "content": "rules\n\nq"},
        {"role": "assistant", "content": "a"},
    ]
    # with no user turn after it, a user turn of its own
    assert P.prepare_messages([{"role": "system", "content": "rules"}]) == [
        {"role": "user", "content": "rules"}
    ]


def test_results_become_one_user_turn_naming_the_calls(monkeypatch):
    _set(monkeypatch, PREPARE_TOOL_RESULTS=True)
    second = dict(CALL, id="c2", function={"name": "g", "arguments": "{}"})
    out = P.prepare_messages(
        [
            {"role": "assistant", "content": None, "tool_calls": [CALL, second]},
            {"role": "tool", "tool_call_id": "c1", "content": "one"},
            {"role": "tool", "tool_call_id": "c2", "content": "two"},
        ]
    )
    assert [m["role"] for m in out] == ["assistant", "user"]
    assert out[1]["content"] == "Result of the call to f:\none\n\nResult of the call to g:\ntwo"


# A JSON call format: <c>{"name": …, "arguments": …}</c>, one per line.
JSON_FORMAT = dict(
    JSON_CALLS=True,
    CALL_START="<c>",
    CALL_END="</c>",
    CALL_SEPARATOR="\n",
    NAME_PATH=("name",),
    ARGUMENTS_PATH=("arguments",),
)


def test_past_calls_as_text_after_the_content(monkeypatch):
    _set(monkeypatch, PREPARE_TOOL_CALLS=True, **JSON_FORMAT)
    (out,) = P.prepare_messages([{"role": "assistant", "content": "let me", "tool_calls": [CALL]}])
    assert "tool_calls" not in out
    head, call = out["content"].split("\n")
    assert head == "let me"
    assert call.startswith("<c>") and call.endswith("</c>")
    assert json.loads(call[3:-4]) == {"name": "f", "arguments": {"a": 1}}


def test_tagged_calls_with_key_value_units(monkeypatch):
    _set(
        monkeypatch,
        CALL_START="<f=",
        CALL_PARTS=(("name", ">", ()), ("arguments", "</f>", ())),
        ARG_KEY_PREFIX="<p=",
        ARG_KEY_END=">",
        ARG_VALUE_SUFFIX="</p>",
    )
    assert P._calls_text([CALL]) == "<f=f><p=a>1</p></f>"


def test_tool_instructions_in_the_system_text(monkeypatch):
    _set(monkeypatch, PREPARE_TOOLS=True, **JSON_FORMAT)
    tool = {
        "type": "function",
        "function": {"name": "f", "parameters": {"properties": {"a": {"type": "integer"}}}},
    }
    out = P.prepare_messages([{"role": "user", "content": "q"}], tools=[tool])
    assert out[0]["role"] == "system" and out[1] == {"role": "user", "content": "q"}
    assert json.dumps(tool["function"]) in out[0]["content"]
    assert out[0]["content"].endswith('<c>{"name": "f", "arguments": {"a": "..."}}</c>')
    assert P.prepare_messages(
        [{"role": "user", "content": "q"}], tools=[tool], tool_definitions=False
    ) == [{"role": "user", "content": "q"}]


def test_ids_the_template_refuses_are_replaced_alike(monkeypatch):
    _set(monkeypatch, PREPARE_CALL_ID_PATTERN="[a-zA-Z0-9]{9}")
    long_id = dict(CALL, id="call_Wq3xPz81LkV7")
    fitting = dict(CALL, id="abcDEF123")
    out = P.prepare_messages(
        [
            {"role": "assistant", "content": None, "tool_calls": [long_id, fitting]},
            {"role": "tool", "tool_call_id": "call_Wq3xPz81LkV7", "content": "r"},
        ]
    )
    new_id = out[0]["tool_calls"][0]["id"]
    assert new_id != "call_Wq3xPz81LkV7" and len(new_id) == 9 and new_id.isalnum()
    assert out[1]["tool_call_id"] == new_id
    assert out[0]["tool_calls"][1]["id"] == "abcDEF123"
    assert (
        P.prepare_messages(
            [{"role": "tool", "tool_call_id": "x_y", "content": ""}], call_ids=False
        )[0]["tool_call_id"]
        == "x_y"
    )
