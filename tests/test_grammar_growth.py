"""Building a grammar grows linearly with the tools (issue 24): ``tool_call_grammar``
for one tool with many properties took 12.7 s for 8,000 (the rules llguidance takes
for lexemes were found pass after pass, one pass per rule of a chain), and
``lark_grammar`` for many tools 5.1 s for 20,000 (each name looked for in a list).

The work is counted at two sizes 10x apart, in lines of Python run (tests/steps.py),
which no load on the machine changes: linear growth is 10x (10.0-10.1x here); the
code before issue 24 grew 55-61x at these sizes (Qwen3-Coder's properties and both
formats' tools). ``python -m tests.benchmarks.linear --inputs grammar_properties
grammar_tools`` times every format (issue 32: timing is the benchmark's).
"""

from __future__ import annotations

import pytest

from tests import roundtrip as rt
from tests.benchmarks.linear import _grammar_tools
from tests.steps import lines_run

LIMIT = 15.0  # growth per 10x


@pytest.mark.parametrize("slug", ["qwen3_coder", "nousresearch_hermes_3_llama_3_1_8b_tool_use"])
@pytest.mark.parametrize(
    "builder,name,sizes",
    [
        ("tool_call_grammar", "grammar_properties", (300, 3_000)),
        ("lark_grammar", "grammar_tools", (1_000, 10_000)),
    ],
)
def test_grammars_grow_linearly(slug, builder, name, sizes):
    build = getattr(rt.module(slug), builder)
    small, large = (lines_run(build, tools=_grammar_tools(name, size)) for size in sizes)
    assert large / small <= LIMIT, (small, large)
