"""The generated parsers on real model outputs from vLLM's public tests (issue 13).

The data and how it is measured: tests/real_outputs/ (README.md there). Three checks:

(a) nothing raises, on any case: parse, parse(strict=True) only with ValueError, the
    stream in chunks of 1 and 7 characters;
(b) where parse(strict=True) accepts an output, the merged stream equals parse;
(c) the figures do not fall below what was measured when they were last raised
    (a ratchet: raise a floor when a fix lifts a figure, never lower one to let a
    regression through).

Issue 13's targets are >= 95% of the in-format cases and >= 80% of all cases; the
floors below are the figures as they stand, whatever the targets say.
"""

from __future__ import annotations

import functools

import pytest

from tests import real_outputs as ro

CASES = ro.load()


@functools.lru_cache(maxsize=None)
def _results() -> dict[str, ro.Result]:
    return {result.case.name: result for result in map(ro.run, CASES)}


def _ids(case: ro.Case) -> str:
    return case.name


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_nothing_raises(case):
    result = _results()[case.name]
    assert result.raised is None, result.raised


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_stream_equals_parse_where_strict_accepts(case):
    result = _results()[case.name]
    assert result.stream_differs is None, result.stream_differs


# Floors, (passed, in-format passed) per (vLLM parser, slug), as measured on
# 2026-11-26 by `python -m tests.real_outputs` (issue 26's runtime tolerances, and
# Seed-OSS's tool-parser cases added). Issue 13's targets: >= 95% of the in-format
# cases, >= 80% of all cases.
FLOORS: dict[tuple[str, str], tuple[int, int]] = {
    ('apertus', 'apertus_8b_instruct'): (21, 14),
    ('cohere_command', 'cohere2moe'): (39, 0),
    ('cohere_command', 'cohereforai_c4ai_command_r7b_12_2024_tool_use'): (39, 1),
    ('deepseek_r1', 'deepseek_ai_deepseek_r1_distill_llama_8b'): (24, 14),
    ('deepseek_r1', 'deepseek_ai_deepseek_r1_distill_qwen_32b'): (24, 14),
    ('deepseek_r1', 'llama_cpp_deepseek_r1'): (24, 14),
    ('deepseek_v3', 'deepseek_ai_deepseek_r1_distill_qwen_32b'): (19, 13),
    ('deepseek_v3', 'llama_cpp_deepseek_r1'): (19, 13),
    ('deepseek_v31', 'deepseek_ai_deepseek_v3_1'): (3, 3),
    ('deepseek_v32', 'deepseek_ai_deepseek_v3_2'): (52, 37),
    ('deepseek_v4', 'deepseek_ai_deepseek_v4'): (8, 6),
    ('deepseek_v4', 'deepseek_ai_deepseek_v4_flash_0731'): (8, 6),
    ('gemma4', 'google_gemma_4_31b_it'): (31, 20),
    ('gemma4', 'google_gemma_4_31b_it_interleaved'): (31, 20),
    ('gemma4_reasoning', 'google_gemma_4_31b_it'): (21, 4),
    ('gemma4_reasoning', 'google_gemma_4_31b_it_interleaved'): (21, 4),
    ('gigachat3', 'gigachat3_10b_a1_8b'): (24, 11),
    ('gigachat3', 'gigachat3_1_10b_a1_8b'): (24, 11),
    ('glm45', 'glm_4_6'): (5, 1),
    ('glm45_reasoning', 'glm_4_6'): (8, 8),
    ('glm45_reasoning', 'glm_4_7_flash'): (12, 4),
    ('glm47', 'glm_4_7_flash'): (12, 8),
    ('gptoss', 'openai_gpt_oss_120b'): (38, 12),
    ('granite4', 'ibm_granite_granite_4_0'): (4, 0),
    ('granite4', 'ibm_granite_granite_4_1'): (4, 0),
    ('hermes', 'mimo_vl'): (30, 15),
    ('hermes', 'nousresearch_hermes_2_pro_llama_3_8b_tool_use'): (30, 15),
    ('hermes', 'nousresearch_hermes_3_llama_3_1_8b_tool_use'): (30, 15),
    ('hermes', 'qwen_qwen2_5_7b_instruct'): (30, 15),
    ('hermes', 'qwen_qwen3_0_6b'): (30, 15),
    ('hermes', 'qwen_qwq_32b'): (30, 15),
    ('hermes', 'reka_edge'): (30, 15),
    ('kimi_k2', 'kimi_k2_instruct'): (44, 7),
    ('kimi_k2', 'kimi_k2_thinking'): (44, 7),
    ('kimi_k2', 'moonshotai_kimi_k2'): (44, 7),
    ('kimi_k2_reasoning', 'kimi_k2_thinking'): (3, 3),
    ('kimi_k3_reasoning', 'kimi_k3'): (5, 2),
    ('lfm2', 'lfm2_5_8b_a1b'): (40, 25),
    ('ling3', 'inclusionai_ling_3_0_flash'): (5, 1),
    ('llama3_json', 'meta_llama_llama_3_1_8b_instruct'): (12, 8),
    ('llama3_json', 'meta_llama_llama_3_2_3b_instruct'): (12, 8),
    ('llama3_json', 'meta_llama_llama_3_3_70b_instruct'): (12, 8),
    ('minicpm5', 'openbmb_minicpm5_1b'): (15, 7),
    ('minimax_m2', 'minimax_m2'): (18, 1),
    ('minimax_m2_reasoning', 'minimax_m2'): (14, 14),
    ('minimax_m3', 'minimax_m3'): (3, 0),
    ('minimax_m3_reasoning', 'minimax_m3'): (13, 9),
    ('mistral', 'mistral_small_3_2_24b_instruct_2506'): (28, 5),
    ('mistral', 'mistralai_ministral_3_14b_reasoning_2512'): (40, 26),
    ('mistral', 'mistralai_mistral_nemo_instruct_2407'): (42, 3),
    ('mistral', 'unsloth_mistral_devstral_small_2507'): (28, 17),
    ('nemotron_v3_reasoning', 'nvidia_nemotron_3_nano_30b_a3b_bf16'): (9, 4),
    ('poolside_v1', 'poolside_laguna_s_2_1'): (6, 2),
    ('poolside_v1', 'poolside_laguna_xs_2'): (6, 3),
    ('poolside_v1', 'poolside_laguna_xs_2_1'): (6, 3),
    ('qwen3', 'qwen3_5_4b'): (84, 39),
    ('qwen3', 'qwen_qwen3_0_6b'): (36, 36),
    ('qwen3', 'qwen_qwq_32b'): (66, 36),
    ('qwen3_coder', 'nvidia_nemotron_3_nano_30b_a3b_bf16'): (51, 28),
    ('qwen3_coder', 'qwen3_5_4b'): (51, 28),
    ('qwen3_coder', 'qwen3_coder'): (51, 28),
    ('seed_oss', 'bytedance_seed_oss'): (12, 12),
    ('smollm3', 'huggingfacetb_smollm3_3b'): (1, 1),
    ('step3p5', 'stepfun3_5_flash'): (28, 16),
    ('step3p5_reasoning', 'stepfun3_5_flash'): (25, 15),
}
TOTAL_FLOOR = (1579, 752)


def test_every_data_file_names_existing_modules():
    import importlib.util

    for case in CASES:
        assert importlib.util.find_spec(f"generated.{case.slug}"), case.name


def test_deviation_texts_are_one_line():
    for case in CASES:
        assert case.deviation is None or (case.deviation.strip() and "\n" not in case.deviation), (
            case.name
        )


def test_figures_do_not_fall():
    rows, total = ro.figures(list(_results().values()))
    fallen = []
    for key, (passed, in_format) in FLOORS.items():
        figure = rows.get(key)
        if figure is None:
            fallen.append(f"{key}: no cases any more")
        elif figure.passed < passed or figure.in_format_passed < in_format:
            fallen.append(
                f"{key}: {figure.passed} (floor {passed}), "
                f"in format {figure.in_format_passed} (floor {in_format})"
            )
    assert not fallen, "\n".join(fallen)
    assert total.passed >= TOTAL_FLOOR[0]
    assert total.in_format_passed >= TOTAL_FLOOR[1]


# The in-format cases that do not pass, each with the clause of the contract that
# excludes it. Every other case written the way its template writes it must pass.
_DROPS = (
    "text the peer drops and we keep: vLLM's Mistral parser drops a malformed call's "
    "text ([TOOL_CALLS][ARGS]{...} with no name); our contract keeps all text that fits "
    "no format as content (DESIGN: nothing is dropped)"
)
IN_FORMAT_EXCLUDED = {
    f"mistral/{slug}/test_malformed_tool_call_matrix_{mode}[{case}]": _DROPS
    for slug in ("unsloth_mistral_devstral_small_2507", "mistralai_ministral_3_14b_reasoning_2512")
    for mode in ("non_streaming", "streaming")
    for case in (
        "malformed_single_args_token",
        "parallel_malformed_args_token",
        "mixed_malformed_args_token_then_wellformed",
    )
}


def test_every_in_format_case_passes_but_those_the_contract_excludes():
    results = _results()
    failing = {name for name, result in results.items() if result.case.in_format and not result.passed}
    assert failing == set(IN_FORMAT_EXCLUDED), sorted(failing ^ set(IN_FORMAT_EXCLUDED))
    for name in IN_FORMAT_EXCLUDED:
        result = results[name]
        # what vLLM drops is in our content, whole: the text is kept, not misread
        assert result.why is not None and "[TOOL_CALLS][ARGS]" in result.why, (name, result.why)
