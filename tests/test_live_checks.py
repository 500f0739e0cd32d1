"""The live run's checks (tests/live/, ``make test-live``) on hand-made token pieces,
without the model: what they compare, and that each can fail.

The live run itself needs the model and the servers' virtualenv; these run in the
default suite (no torch, no model)."""

from __future__ import annotations

import pytest

from tests import roundtrip as rt
from tests.live import reading, table

WEATHER = rt.TOOLS["get_weather"]
# Qwen3-Coder's call cut as a tokenizer might: markers split across pieces, a piece
# that holds nothing yet (DecodeStream's None for a partial character), a marker
# whole in one piece.
PIECES = ["<tool", "_call>\n<", "function", "=get_weather>", "\n<parameter=", "city>\n",
          "Par", "", "is\n</parameter>\n</function>", "\n</tool_call>"]  # fmt: skip


def test_stream_fed_token_pieces_agrees_with_parse():
    module = rt.module("qwen3_coder")
    message, differs = reading.stream_vs_parse(
        module, PIECES, tools=[WEATHER], enable_thinking=False
    )
    assert differs == []
    assert [call["function"]["name"] for call in message["tool_calls"]] == ["get_weather"]


class _Lossy:
    """A module whose stream drops one piece: the check must say so."""

    def __init__(self, module, dropped: int):
        self.parse = module.parse
        real, lost = module.StreamParser, dropped

        class StreamParser:
            def __init__(self, **options):
                self.inner, self.count = real(**options), 0

            @property
            def abandoned(self):
                return self.inner.abandoned

            def feed(self, text):
                self.count += 1
                return [] if self.count == lost else self.inner.feed(text)

            def finish(self):
                return self.inner.finish()

        self.StreamParser = StreamParser


@pytest.mark.parametrize("dropped", [1, 7])
def test_a_stream_that_loses_a_piece_is_caught(dropped):
    module = _Lossy(rt.module("qwen3_coder"), dropped)
    _, differs = reading.stream_vs_parse(module, PIECES, tools=[WEATHER], enable_thinking=False)
    assert differs


def test_merge_drops_abandoned_calls_and_flags_disorder():
    deltas = [
        {"content": "a"},
        {"tool_calls": [{"index": 1, "id": "x", "function": {"name": "f", "arguments": "{"}}]},
        {"tool_calls": [{"index": 0, "function": {"arguments": "}"}}]},
        {"reasoning_content": "r"},
    ]
    merged = reading.merge(deltas, abandoned=[1])
    assert merged["content"] == "a" and merged["reasoning_content"] == "r"
    assert [call["arguments"] for call in merged["tool_calls"]] == ["}"]
    assert len(merged["problems"]) == 2  # index 0 after 1, and its first delta unnamed


def _message(content, arguments):
    return {"content": content, "reasoning_content": None, "tool_calls": [
        {"id": None, "name": "f", "arguments": arguments}], "problems": []}  # fmt: skip


def test_differences_read_arguments_exactly_or_as_json():
    same, spaced = _message(None, '{"a": 1}'), _message(None, '{"a":1}')
    assert reading.differences(same, same) == []
    assert reading.differences(spaced, same)  # exact: the text differs
    assert reading.differences(spaced, same, exact_arguments=False) == []
    assert reading.differences(_message("x", '{"a": 1}'), same)
    assert reading.differences(_message(None, '{"a": 2}'), same, exact_arguments=False)


def _rows(passing: int, failing: int) -> list[table.Row]:
    rows = [table.Row(f"ok{n}", "default") for n in range(passing)]
    for n in range(failing):
        row = table.Row(f"bad{n}", "default")
        row.fail("token-cap", "160 tokens")
        rows.append(row)
    return rows


def test_the_run_allows_five_percent_of_formats_to_fail():
    assert table.summary(_rows(38, 2), [], 0.05, 1.0)[0]
    ok, line = table.summary(_rows(37, 3), [], 0.05, 1.0)
    assert not ok and "3 failing" in line and "token-cap 3" in line
    assert not table.summary(_rows(40, 0), ["own template: no content"], 0.05, 1.0)[0]


def test_a_row_reports_its_first_cause_by_class():
    row = table.Row("f", "default")
    row.fail("vllm", "differs")
    row.fail("dead-end", "no token allowed")
    row.fail("stream", "differs")
    assert row.cause == "dead-end" and len(row.notes) == 3
    with pytest.raises(AssertionError):
        row.fail("no such cause", "")
