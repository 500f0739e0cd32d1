"""transformers' ``response_template`` for each benchmarked format, written for this
benchmark from the formats' templates (transformers ships none for these models).

A response template names the message's fields: one without an opener (``content``) takes
whatever text is outside the others; ``tool_calls`` opens at the call's opening marker,
closes at its closing marker, reads its body with a content parser (``json``, or
``xml-inline`` for ``<parameter=KEY>`` tags), repeats for parallel calls, and is reshaped by
``transform`` into an OpenAI tool call (``{name}`` is a capture of the opening pattern,
``{content}`` the parsed body). The literal ``open``/``close`` markers are the parser's fast
path; a pattern is used only where a capture is needed.
"""

from __future__ import annotations

HERMES_2_PRO = {
    "start_anchor": "<|im_start|>assistant\n",
    "defaults": {"role": "assistant"},
    "fields": {
        "content": {"content": "text"},
        "tool_calls": {
            "open": "<tool_call>",
            "close": "</tool_call>",
            "content": "json",
            "repeats": True,
            "transform": {"type": "function", "function": "{content}"},
        },
    },
}

QWEN3_CODER = {
    "start_anchor": "<|im_start|>assistant\n",
    "defaults": {"role": "assistant"},
    "fields": {
        "content": {"content": "text"},
        "tool_calls": {
            "open_pattern": r"<tool_call>\s*<function=(?P<name>[^>\n]+)>",
            "close": "</tool_call>",
            "content": "xml-inline",
            "content_args": {
                "tag_pattern": (
                    r"<parameter=(?P<key>[^>\n]+)>\n(?P<value>.*?)\n</parameter>"
                )
            },
            "repeats": True,
            "transform": {
                "type": "function",
                "function": {"name": "{name}", "arguments": "{content}"},
            },
        },
    },
}

# slug of the generated module -> its response template
BY_SLUG = {
    "qwen3_coder": QWEN3_CODER,
    "nousresearch_hermes_2_pro_llama_3_8b_tool_use": HERMES_2_PRO,
}
