"""A template's own thinking switch (capabilities.thinking_switch) on the corpus: Kimi K3
reads `thinking`, not enable_thinking; with it off its prompt opens the answer's block
(content.opened_by_prompt), so the output starts inside the content and its closer ends
it. The invented template with a switch of another name is in tests/test_invented.py."""

from __future__ import annotations

import importlib

import pytest

from tests import roundtrip as rt
from tests.test_stream import chunkings, merge, streamed

K3 = "kimi_k3"
CALL = (
    '<|open|>tools<|sep|><|open|>call tool="get_weather" index="1"<|sep|>'
    '<|open|>argument key="city" type="string"<|sep|>Oslo<|close|>argument<|sep|>'
    "<|close|>call<|sep|><|close|>tools<|sep|>"
)


def _read(slug, text, **options):
    module = importlib.import_module(f"generated.{slug}")
    message = module.parse(text, **options)
    for name, cuts in chunkings(text, text):
        fed, finished, abandoned = streamed(module, text, cuts, **options)
        assert merge(fed + finished, abandoned) == message, (name, text)
    return message


def test_the_analysis_renders_kimi_k3_with_its_own_switch():
    spec = rt.load_spec(K3)
    assert spec["capabilities"]["thinking_switch"] == {
        "variables": {"thinking": {"thinking_on": True, "thinking_off": False}},
        "default": "thinking_on",
    }
    assert spec["reasoning"]["opened_by_prompt"] == {"thinking_on": True, "thinking_off": False}
    assert spec["content"]["opened_by_prompt"] == {"thinking_on": False, "thinking_off": True}
    template = rt.template_for(spec)
    if template is None:
        pytest.skip("no corpus: run make templates")
    prompt = template.render(rt.history(spec), add_generation_prompt=True, enable_thinking=False)
    assert prompt.endswith(spec["content"]["start"])


@pytest.mark.parametrize(
    "text,content,calls",
    [
        ("It is sunny.<|close|>response<|sep|>", "It is sunny.", 0),
        ("<|close|>response<|sep|>" + CALL, None, 1),
        ("Let me check.<|close|>response<|sep|>" + CALL, "Let me check.", 1),
        ("<|open|>response<|sep|>It is sunny.<|close|>response<|sep|>", "It is sunny.", 0),
    ],
)
def test_kimi_k3_with_thinking_off_starts_inside_the_content(text, content, calls):
    message = _read(K3, text, enable_thinking=False)
    assert message["reasoning_content"] is None
    assert (message["content"], len(message["tool_calls"])) == (content, calls)


def test_kimi_k3_with_thinking_on_starts_inside_the_reasoning():
    text = "It may rain.<|close|>think<|sep|><|open|>response<|sep|>Take an umbrella."
    message = _read(K3, text, enable_thinking=True)
    assert (message["reasoning_content"], message["content"]) == ("It may rain.", "Take an umbrella.")


@pytest.mark.parametrize(
    "text,thinking",
    [
        ("It may rain.<|close|>think<|sep|><|open|>response<|sep|>Take an umbrella.", True),
        ("<|close|>think<|sep|><|open|>response<|sep|><|close|>response<|sep|>" + CALL, True),
        ("<|open|>response<|sep|>Let me check.<|close|>response<|sep|>" + CALL, False),
    ],
)
def test_strict_reading_takes_the_content_opener_the_model_writes(text, thinking):
    """The content's opener begins as a call does ("<|open|>"): read strictly, it
    is the content's, not a malformed call (issue 32: 8 of Kimi K3's 10 round-trip
    texts were refused, and so left out of every grammar's acceptance test)."""
    module = importlib.import_module(f"generated.{K3}")
    message = module.parse(text, enable_thinking=thinking)
    assert module.parse(text, enable_thinking=thinking, strict=True) == message
    # A call that is broken still is one.
    broken = text.replace("<|close|>call<|sep|>", "<|close|>cal<|sep|>")
    if broken != text:
        with pytest.raises(ValueError, match="malformed tool call"):
            module.parse(broken, enable_thinking=thinking, strict=True)
