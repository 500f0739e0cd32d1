"""Model outputs written by hand, for templates whose history never shows reasoning
(their prompt opens the block, but an earlier turn is rendered without it), so the
template cannot be the oracle. The texts are what such models write."""

from __future__ import annotations

import importlib

import pytest

from tests import roundtrip as rt

THINK = "I should multiply.\n6 * 7 = 42."
OUTPUTS = {
    # slug: (model output after the prompt, enable_thinking)
    "qwen_qwq_32b": (f"{THINK}\n</think>\n\nThe answer is 42.<|im_end|>", True),
    "deepseek_ai_deepseek_r1_distill_qwen_32b": (
        f"{THINK}\n</think>\n\nThe answer is 42.<｜end▁of▁sentence｜>",
        True,
    ),
    "deepseek_ai_deepseek_r1_distill_llama_8b": (
        f"{THINK}\n</think>\n\nThe answer is 42.",
        True,
    ),
    "llama_cpp_deepseek_r1": (f"{THINK}\n</think>\n\nThe answer is 42.", True),
    "deepseek_ai_deepseek_v3_1": (f"{THINK}</think>The answer is 42.", True),
    "nvidia_nemotron_nano_v2": (f"{THINK}\n</think>\nThe answer is 42.\n<SPECIAL_12>", True),
    "llama_cpp_rwkv_world": (f"{THINK}\n</think>\nThe answer is 42.", True),
    "cohere2moe": (
        f"{THINK}<|END_THINKING|><|START_TEXT|>The answer is 42.<|END_TEXT|><|END_OF_TURN_TOKEN|>",
        True,
    ),
    "openai_gpt_oss_120b": (
        f"<|channel|>analysis<|message|>{THINK}<|end|><|start|>assistant"
        "<|channel|>final<|message|>The answer is 42.<|return|>",
        True,
    ),
}


def _parser(slug):
    if slug not in rt.slugs():
        pytest.skip("no spec")
    return importlib.import_module(f"generated.{slug}")


@pytest.mark.parametrize("slug", sorted(OUTPUTS))
def test_handwritten_output(slug):
    parser = _parser(slug)
    text, thinking = OUTPUTS[slug]
    parsed = parser.parse(text, enable_thinking=thinking)
    assert parsed["reasoning_content"] == THINK
    assert parsed["content"] == "The answer is 42."
    assert parsed["tool_calls"] == []


@pytest.mark.parametrize("slug", sorted(OUTPUTS))
def test_unclosed_reasoning_is_reasoning(slug):
    parser = _parser(slug)
    text, thinking = OUTPUTS[slug]
    cut = text.index(THINK) + len(THINK)
    parsed = parser.parse(text[:cut], enable_thinking=thinking)
    assert parsed["reasoning_content"] == THINK
    assert parsed["content"] is None


@pytest.mark.parametrize("slug", rt.slugs())
def test_whitespace_around_the_answer_is_not_part_of_it(slug):
    """The blank lines and spaces a model writes around its text are dropped, whether
    the format reads that text as the answer or (prompt-opened) as reasoning."""
    parsed = _parser(slug).parse("\n  The answer is 42.  \n", enable_thinking=False)
    assert (parsed["content"] or parsed["reasoning_content"]) == "The answer is 42."
