"""Building a grammar grows linearly with the tools (issue 24): ``tool_call_grammar``
for one tool with many properties took 12.7 s for 8,000 (the rules llguidance takes
for lexemes were found pass after pass, one pass per rule of a chain), and
``lark_grammar`` for many tools 5.1 s for 20,000 (each name looked for in a list).

Timed here at two sizes 10x apart (the best of three runs, CPU time, the collector
off): linear growth is about 10x, the old quadratic growth was 60x and more. The
limit leaves room for a shared machine; ``python -m tests.benchmarks.linear --inputs
grammar_properties grammar_tools`` checks every format against 15x and 3 s.
"""

from __future__ import annotations

import gc
import time

import pytest

from tests import roundtrip as rt
from tests.benchmarks.linear import _grammar_tools

LIMIT = 30.0  # growth per 10x


def _best(function, argument) -> float:
    gc.collect()
    gc.disable()
    try:
        best = float("inf")
        for _ in range(3):
            start = time.process_time()
            function(tools=argument)
            best = min(best, time.process_time() - start)
    finally:
        gc.enable()
    return max(best, 1e-3)


@pytest.mark.parametrize("slug", ["qwen3_coder", "nousresearch_hermes_3_llama_3_1_8b_tool_use"])
@pytest.mark.parametrize(
    "builder,name,sizes",
    [
        ("tool_call_grammar", "grammar_properties", (400, 4_000)),
        ("lark_grammar", "grammar_tools", (2_000, 20_000)),
    ],
)
def test_grammars_grow_linearly(slug, builder, name, sizes):
    build = getattr(rt.module(slug), builder)
    small, large = (_best(build, _grammar_tools(name, size)) for size in sizes)
    assert large / small <= LIMIT, (small, large)
