"""One calling convention for what a format module offers (issue 32; DESIGN.md, "A
generated module"): every export takes ``tools`` first, by position or by keyword,
and its settings by keyword only; ``parse`` takes the text first and
``prepare_messages`` the messages, ``StreamParser`` nothing by position. Checked on
every generated module and on a standalone one (``chatfmt export standalone``), by
signature and by calling; and through the command line, which calls each export the
same way. On main before this, ``lark_grammar(tools)`` and ``grammar(tools)`` raised
TypeError (keywords only) while ``structural_tag(tools)`` took tools by position and
had no default.
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import os
import sys

import pytest

from compiler.__main__ import main
from compiler.codegen import module as module_codegen
from compiler.runtime import binding
from tests import roundtrip as rt
from tests.test_response_template import _format

EXPORTS = ("grammar", "tool_call_grammar", "structural_tag", "lark_grammar")
# The one parameter each public function takes by position (None: none).
POSITIONAL = {
    "parse": "text",
    "StreamParser": None,
    "prepare_messages": "messages",
    "compile_tools": "tools",
    **{name: "tools" for name in EXPORTS},
}
# Each export's settings, with a value that differs from the default.
SETTINGS = {
    "grammar": {"enable_thinking": False, "tool_choice": "none", "parallel_tool_calls": False},
    "tool_call_grammar": {"tool_choice": "auto", "parallel_tool_calls": False},
    "structural_tag": {"enable_thinking": False, "tool_choice": "none", "parallel_tool_calls": False},
    "lark_grammar": {"enable_thinking": False, "tool_choice": "none", "parallel_tool_calls": False},
}
CALLS = "qwen3_coder"
TOOLS = [rt.TOOLS["get_weather"], rt.TOOLS["get_time"]]


def test_every_public_function_is_classified():
    assert set(POSITIONAL) == set(binding.PUBLIC)
    assert set(SETTINGS) == set(EXPORTS)


def _shape(function) -> tuple[str | None, list[str]]:
    """(the parameter taken by position, the others that are not keyword only, and
    the first where it cannot be given by keyword)."""
    parameters = list(inspect.signature(function).parameters.values())
    positional = [p for p in parameters if p.kind is not inspect.Parameter.KEYWORD_ONLY
                  and p.kind is not inspect.Parameter.VAR_KEYWORD]  # fmt: skip
    first = positional[0] if positional else None
    odd = [f"{p.name} ({p.kind.description})" for p in positional[1:]]
    if first is not None and first.kind is not inspect.Parameter.POSITIONAL_OR_KEYWORD:
        odd.append(f"{first.name} ({first.kind.description})")
    return (first.name if first else None), odd


def _check(module, where: str) -> None:
    for name, expected in POSITIONAL.items():
        function = getattr(module, name)
        first, odd = _shape(function)  # a class's without self
        assert (first, odd) == (expected, []), (where, name, str(inspect.signature(function)))
        if name in EXPORTS:
            tools = inspect.signature(function).parameters["tools"]
            assert tools.default is None, (where, name)


@pytest.mark.parametrize("slug", rt.slugs())
def test_the_signatures_of_a_generated_module(slug):
    _check(rt.module(slug), slug)


def test_the_signatures_of_a_standalone_module(tmp_path):
    path = tmp_path / "standalone_qwen3_coder.py"
    path.write_text(module_codegen.standalone(_format(CALLS)), encoding="utf-8")
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    try:
        spec.loader.exec_module(module)
        _check(module, "standalone")
    finally:
        sys.modules.pop(path.stem, None)


@pytest.mark.parametrize("name", EXPORTS)
def test_tools_by_position_or_by_keyword(name):
    function = getattr(rt.module(CALLS), name)
    settings = SETTINGS[name]
    assert function(TOOLS) == function(tools=TOOLS)
    assert function(TOOLS, **settings) == function(tools=TOOLS, **settings)
    assert function() == function(None) == function(tools=None)
    with pytest.raises(TypeError):
        function(TOOLS, *settings.values())  # the settings by keyword only
    with pytest.raises(TypeError, match="tools is a list"):
        function(False)  # a setting given where tools go


@pytest.mark.parametrize(
    "kind,function",
    [("gbnf", "grammar"), ("tool-call-gbnf", "tool_call_grammar"),
     ("lark", "lark_grammar"), ("structural-tag", "structural_tag")],
)  # fmt: skip
def test_the_command_line_calls_each_export_alike(tmp_path, capsys, kind, function):
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps(TOOLS), encoding="utf-8")
    spec = os.path.join(rt.SPECS, f"{CALLS}.yaml")
    assert main(["export", kind, spec, "--tools", str(tools), "--no-parallel-tool-calls"]) == 0
    out = capsys.readouterr().out
    made = getattr(rt.module(CALLS), function)(TOOLS, parallel_tool_calls=False)
    assert out == (json.dumps(made, ensure_ascii=False, indent=2) + "\n" if kind == "structural-tag"
                   else made)  # fmt: skip
