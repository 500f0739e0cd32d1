"""``structural_tag`` without xgrammar (runs in ``make test``): every module gives a
JSON-ready structural tag for every setting, the same each time, and refuses the
settings it cannot honour. xgrammar reads them in test_structural_tag.py."""

from __future__ import annotations

import json

import pytest

from tests import roundtrip as rt
from tests.fallback_outputs import fallback_slugs, format_of, without_fallback

TOOLS = [rt.TOOLS[name] for name in ("get_weather", "get_time", "run_code")]
NAMED = {"type": "function", "function": {"name": "get_time"}}
SETTINGS = [
    {},
    {"tool_choice": "none"},
    {"tool_choice": "required"},
    {"tool_choice": NAMED},
    {"parallel_tool_calls": False},
    {"tool_choice": "required", "parallel_tool_calls": False},
]
SLUGS = rt.slugs()


def _has_calls(slug: str) -> bool:
    """Whether the module reads calls: the template's own, or our fallback format."""
    return format_of(slug).has_calls


@pytest.mark.parametrize("slug", SLUGS)
def test_json_ready_and_deterministic(slug):
    module = rt.module(slug)
    assert json.loads(json.dumps(module._STRUCTURAL_TAG)) == module._STRUCTURAL_TAG
    for thinking in (True, False):
        for setting in SETTINGS if _has_calls(slug) else SETTINGS[:2]:
            tag = module.structural_tag(TOOLS, enable_thinking=thinking, **setting)
            assert tag["type"] == "structural_tag"
            assert json.loads(json.dumps(tag)) == tag
            assert module.structural_tag(TOOLS, enable_thinking=thinking, **setting) == tag


@pytest.mark.parametrize("slug", SLUGS)
def test_refuses_what_it_cannot_honour(slug):
    module = rt.module(slug)
    other = {"type": "function", "function": {"name": "not_a_tool"}}
    with pytest.raises(ValueError):
        module.structural_tag(TOOLS, tool_choice=other)
    with pytest.raises(ValueError):
        module.structural_tag(TOOLS, tool_choice="sometimes")
    with pytest.raises(ValueError):
        module.structural_tag([], tool_choice="required")
    if not _has_calls(slug):
        with pytest.raises(ValueError):
            module.structural_tag(TOOLS, tool_choice="required")


def test_a_format_without_calls_refuses_a_required_one():
    # (every corpus format reads calls, the template's or our fallback ones)
    module = without_fallback(fallback_slugs()[0])
    with pytest.raises(ValueError):
        module.structural_tag(TOOLS, tool_choice="required")
    assert module.structural_tag(TOOLS, tool_choice="none") == module.structural_tag(TOOLS)


@pytest.mark.parametrize("slug", [slug for slug in SLUGS if _has_calls(slug)])
def test_calls_only_to_the_tools_given(slug):
    """The begin of each call tag names the tool (or the JSON schema holds it)."""
    module = rt.module(slug)
    text = json.dumps(module.structural_tag(TOOLS[:1]), ensure_ascii=False)
    assert "get_weather" in text and "get_time" not in text
    assert "get_time" in json.dumps(module.structural_tag(TOOLS, tool_choice=NAMED))
    none = json.dumps(module.structural_tag(TOOLS, tool_choice="none"))
    assert "get_weather" not in none
