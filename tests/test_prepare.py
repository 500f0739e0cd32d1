"""prepare_messages, with each corpus template as its own oracle.

The canonical conversations of tests/conversations.json are rendered by every corpus
template twice: as they are, and through the generated module's prepare_messages. A
*piece* is one text a conversation holds (its ``pieces``: system text, user texts, the
last assistant turn's reasoning where the spec has a reasoning format, each call's
name and string values, tool results, answers); it shows where the render holds it. A
call's name must show more often than in the render of the same turn's tools alone
(the definitions name it too). A render that raises shows none of its pieces.

With prepare_messages, at least 99% of the pieces must show over the corpus; the
figure without it is printed beside (docs/using-parsers.md, "Preparing messages").
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

import pytest

from compiler.render import RenderError
from tests import roundtrip as rt

FIXTURE = os.path.join(os.path.dirname(__file__), "conversations.json")
ACCEPTANCE = 0.99


def fixture() -> dict:
    with open(FIXTURE, encoding="utf-8") as handle:
        return json.load(handle)


@dataclass
class Tally:
    shown: int = 0
    total: int = 0
    lost: list[str] = field(default_factory=list)

    def share(self) -> float:
        return self.shown / self.total if self.total else 1.0


def _render(template, messages, tools) -> str | None:
    try:
        return template.render(messages, tools=tools, add_generation_prompt=False)
    except RenderError:
        return None


def measure(slug: str, prepared: bool, tally: Tally) -> None:
    """Adds the pieces of every fixture conversation, as ``slug``'s template renders
    them (through prepare_messages where ``prepared``), to ``tally``."""
    spec = rt.load_spec(slug)
    template = rt.template_for(spec)
    if template is None:
        pytest.skip("no corpus: run make templates")
    module = rt.module(slug)
    data = fixture()
    reasoning = spec["reasoning"]["mode"] != "none"
    for conversation in data["conversations"]:
        tools = data["tools"] if conversation.get("tools") else None
        messages = conversation["messages"]
        # The turns before the first assistant turn: the render that names the
        # tools without any call.
        opening = messages[
            : next(i for i, m in enumerate(messages) if m["role"] == "assistant")
        ]
        if prepared:
            messages = module.prepare_messages(messages, tools=tools)
            opening = module.prepare_messages(opening, tools=tools)
        shape = rt.template_tools(spec, tools)
        render = _render(template, messages, shape)
        before = (_render(template, opening, shape) or "") if tools else ""
        for kind, texts in conversation["pieces"].items():
            if kind == "reasoning" and not reasoning:
                continue
            for text in texts:
                tally.total += 1
                shows = render is not None and text in render
                if shows and kind == "call":
                    shows = render.count(text) > before.count(text)  # type: ignore[union-attr]
                if shows:
                    tally.shown += 1
                else:
                    why = "the render raised" if render is None else "not shown"
                    tally.lost.append(
                        f"{slug}: {conversation['name']}: {kind} {text!r}: {why}"
                    )


def test_prepare_messages_shows_what_the_conversation_holds(capsys):
    slugs = rt.slugs()
    if not slugs:
        pytest.skip("no specs")
    with_prepare, without = Tally(), Tally()
    for slug in slugs:
        measure(slug, True, with_prepare)
        measure(slug, False, without)
    with capsys.disabled():
        print()
        print(f"pieces shown over {len(slugs)} templates:")
        print(
            f"  without prepare_messages: {without.shown} of {without.total} "
            f"({without.share():.1%})"
        )
        print(
            f"  with prepare_messages:    {with_prepare.shown} of {with_prepare.total} "
            f"({with_prepare.share():.1%})"
        )
        for line in with_prepare.lost:
            print("  still lost:", line)
    assert with_prepare.total == without.total
    assert with_prepare.share() >= ACCEPTANCE, with_prepare.lost


def _twice_encoded(slug: str, prepared: bool) -> bool:
    """Whether ``slug``'s template renders the fixture's past call, whose arguments
    are JSON text, as a JSON string of that text (``arguments | tojson``)."""
    spec = rt.load_spec(slug)
    template = rt.template_for(spec)
    if template is None:
        pytest.skip("no corpus: run make templates")
    data = fixture()
    messages = data["conversations"][1]["messages"]
    arguments = messages[2]["tool_calls"][0]["function"]["arguments"]
    if prepared:
        messages = rt.module(slug).prepare_messages(messages, tools=data["tools"])
    render = _render(template, messages, rt.template_tools(spec, data["tools"]))
    return render is not None and json.dumps(arguments)[1:-1] in render


def test_prepare_messages_writes_json_text_arguments_once():
    """Templates that write ``arguments | tojson`` show arguments given as JSON text
    as a JSON string of JSON (the model writes an object): through prepare_messages
    every template shows them once encoded."""
    slugs = [s for s in rt.slugs() if rt.load_spec(s)["capabilities"]["tool_calls"]]
    if not slugs:
        pytest.skip("no specs")
    twice = [slug for slug in slugs if _twice_encoded(slug, prepared=False)]
    assert "qwen_qwen2_5_7b_instruct" in twice  # the template's own tojson
    assert [slug for slug in twice if _twice_encoded(slug, prepared=True)] == []


# ---------------------------------------------------------------------------
# what prepare_messages writes, read back by the module's own parser


def _module_with(slug: str, **polyfills):
    """``slug``'s module generated with these polyfills on (in memory)."""
    import dataclasses

    from compiler import model
    from compiler.codegen.module import load

    spec = rt.load_spec(slug)
    fmt = model.build(spec, slug=slug, origin=f"specs/{slug}.yaml")
    fmt = dataclasses.replace(fmt, polyfills=dataclasses.replace(fmt.polyfills, **polyfills))
    return vars(load(fmt))


CALLING = [slug for slug in rt.slugs() if rt.module(slug).TRIGGERS]


@pytest.mark.parametrize("slug", CALLING)
def test_past_calls_are_written_as_the_parser_reads_them(slug):
    """A past call written as text (where the template cannot render calls) is in
    the format the module parses, our fallback included: parse gives the call back."""
    module = _module_with(slug, tool_calls=True, arguments=None)
    data = fixture()
    messages = data["conversations"][1]["messages"]
    written = module["prepare_messages"](messages, tools=data["tools"])
    turn = next(m for m in written if m["role"] == "assistant")
    assert "tool_calls" not in turn
    parsed = module["parse"](turn["content"], tools=data["tools"])
    original = messages[2]["tool_calls"][0]["function"]
    assert [call["function"]["name"] for call in parsed["tool_calls"]] == [original["name"]]
    got = json.loads(parsed["tool_calls"][0]["function"]["arguments"])
    assert got == json.loads(original["arguments"])


@pytest.mark.parametrize("slug", CALLING)
def test_tool_instructions_show_a_call_the_parser_reads(slug):
    """The instructions written where the template takes no tools end in an example
    call; the module parses it as that tool's call."""
    module = _module_with(slug, tool_definitions=True)
    data = fixture()
    written = module["prepare_messages"](
        [{"role": "user", "content": "hi"}], tools=data["tools"], system=False
    )
    assert written[0]["role"] == "system"
    example = written[0]["content"].split("in place of an answer:\n", 1)[1]
    parsed = module["parse"](example, tools=data["tools"])
    assert [c["function"]["name"] for c in parsed["tool_calls"]] == ["lookup_quillwort"]


@pytest.mark.parametrize("slug", rt.slugs())
def test_switched_off_nothing_changes(slug):
    module = rt.module(slug)
    data = fixture()
    off = dict.fromkeys(
        (
            "reasoning",
            "arguments",
            "content",
            "typed_content",
            "system",
            "tool_definitions",
            "tool_results",
            "tool_calls",
            "call_ids",
        ),
        False,
    )
    for conversation in data["conversations"]:
        messages = conversation["messages"]
        kept = json.dumps(messages)
        assert module.prepare_messages(messages, tools=data["tools"], **off) == messages
        module.prepare_messages(messages, tools=data["tools"])
        assert json.dumps(messages) == kept  # the input is left as it is


def test_spec_records_the_polyfills_the_module_applies():
    for slug in rt.slugs():
        spec = rt.load_spec(slug)
        applied = [
            name
            for name, value in spec["polyfills"].items()
            if name != "fallback_call" and value not in (None, False)
        ]
        doc = rt.module(slug).__doc__
        for name in applied:
            shown = "content" if name == "non_null_content" else name
            assert shown in doc.split("this template reads (")[1], (slug, name)


def test_a_message_that_is_no_message_is_refused():
    module = rt.module("google_gemma_2_2b_it")
    with pytest.raises(TypeError, match="role"):
        module.prepare_messages([{"content": "no role"}])
    with pytest.raises(TypeError, match="role"):
        module.prepare_messages(["text"])
