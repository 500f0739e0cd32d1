"""The structure of every generated module: nothing defined that nothing uses, a
docstring that states the format, black-stable text, and the standard library's
ast, json and re as its only imports.

(That a module regenerated from its spec gives the committed bytes is checked by
tests/test_generated.py, which rebuilds everything from the templates; that the
modules import with the standard library alone, in a fresh interpreter, too.)
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
MODULES = sorted(path for path in (ROOT / "generated").glob("*.py") if path.name != "__init__.py")
ALLOWED_IMPORTS = {"ast", "json", "re", "__future__"}
# Checking that black leaves a module as it is takes ~0.3 s a module: ~20 s for
# all of them on 2 cores, so all are checked.


def _ids(paths):
    return [path.stem for path in paths]


@functools.cache
def _source(path: Path) -> str:
    return path.read_text(encoding="utf-8")


@functools.cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(_source(path), filename=str(path))


def _top_value(tree: ast.Module, name: str):
    """The literal value assigned to ``name`` at the module's top level."""
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            return ast.literal_eval(value)
    raise LookupError(name)


def _defined(node: ast.stmt) -> set[str]:
    """The names a top-level statement binds."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return {
            n.id
            for target in targets
            for n in ast.walk(target)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
        }
    if isinstance(node, ast.Import):
        return {(alias.asname or alias.name).split(".")[0] for alias in node.names}
    if isinstance(node, ast.ImportFrom) and node.module != "__future__":
        return {alias.asname or alias.name for alias in node.names}
    return set()


def _read(node: ast.AST) -> set[str]:
    return {
        n.id
        for n in ast.walk(node)
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Load, ast.Del))
    }


def test_there_are_modules():
    assert len(MODULES) >= 60


# --- (a) nothing defined that nothing uses ---------------------------------------------


@pytest.mark.parametrize("path", MODULES, ids=_ids(MODULES))
def test_no_unused_top_level_definitions(path):
    tree = _tree(path)
    public = set(_top_value(tree, "__all__"))
    reads = [_read(node) for node in tree.body]
    unused = []
    for index, node in enumerate(tree.body):
        for name in sorted(_defined(node) - public - {"__all__"}):
            # read by some other statement: a function calling only itself is unused
            if not any(name in names for other, names in enumerate(reads) if other != index):
                unused.append(f"line {node.lineno}: {name}")
    assert not unused, unused


@pytest.mark.parametrize("path", MODULES, ids=_ids(MODULES))
def test_everything_public_is_defined(path):
    tree = _tree(path)
    defined = set().union(*(_defined(node) for node in tree.body))
    assert set(_top_value(tree, "__all__")) <= defined


# --- (b) no private method of StreamParser that nothing calls -------------------------


def _self_attributes(node: ast.AST) -> set[str]:
    return {
        n.attr
        for n in ast.walk(node)
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self"
    }


@pytest.mark.parametrize("path", MODULES, ids=_ids(MODULES))
def test_stream_parser_has_no_uncalled_private_methods(path):
    tree = _tree(path)
    (cls,) = [
        node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "StreamParser"
    ]
    methods = {node.name: node for node in cls.body if isinstance(node, ast.FunctionDef)}
    private = {name for name in methods if name.startswith("_") and not name.startswith("__")}
    # Called by another method:
    lonely = [
        name
        for name in sorted(private)
        if not any(
            name in _self_attributes(body) for other, body in methods.items() if other != name
        )
    ]
    assert not lonely, lonely
    # ... and reached from a public method (two private methods calling only each
    # other are dead too). A private attribute read outside the class counts as a
    # way in.
    outside = {
        n.attr
        for node in tree.body
        if node is not cls
        for n in ast.walk(node)
        if isinstance(n, ast.Attribute)
    }
    reached = {name for name in methods if name not in private} | (private & outside)
    work = list(reached)
    while work:
        for name in _self_attributes(methods[work.pop()]) & private - reached:
            reached.add(name)
            work.append(name)
    assert not private - reached, sorted(private - reached)


# --- (c) the docstring states the format ----------------------------------------------


def _markers(spec: dict, stop: list[str]) -> list[tuple[str, str]]:
    """(where, marker) for every marker of the spec that parse reads."""
    found = []
    reasoning = spec["reasoning"]
    if reasoning["mode"] != "none":
        for key in ("start", "end"):
            if reasoning.get(key):
                found.append((f"reasoning.{key}", reasoning[key]))
    content = spec["content"]
    if content["mode"] != "plain":
        for key in ("start", "end"):
            if content.get(key):
                found.append((f"content.{key}", content[key]))
    tools = spec["tools"]
    if tools["format"] != "none":
        call = tools["call"]
        found.append(("tools.call.start", call["start"]))
        if call.get("end"):
            found.append(("tools.call.end", call["end"]))
        for number, part in enumerate(call.get("parts") or ()):
            found.append((f"tools.call.parts.{number}.after", part["after"]))
        for key in ("start", "end"):
            if (tools.get("section") or {}).get(key):
                found.append((f"tools.section.{key}", tools["section"][key]))
    found += [(f"STOP[{number}]", marker) for number, marker in enumerate(stop)]
    return found


@pytest.mark.parametrize("path", MODULES, ids=_ids(MODULES))
def test_docstring_states_the_format(path):
    tree = _tree(path)
    first = tree.body[0]
    assert (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
        and first.lineno == 1
    ), "the module opens with its docstring"
    # The docstring's lines as written in the file's first 25 lines (its first line
    # shares the file's first).
    head = "\n".join(first.value.value.splitlines()[:25])
    assert head.startswith(f"Output parser for the {path.stem!r} chat format.")
    spec = _top_value(tree, "SPEC")
    stop = _top_value(tree, "STOP")
    assert stop == spec["end_of_turn"]["markers"]
    missing = [
        (where, marker) for where, marker in _markers(spec, stop) if repr(marker) not in head
    ]
    assert not missing, missing


def test_the_marker_list_covers_the_required_markers():
    """The markers checked above include, for a format with all of them, its
    reasoning markers, its call opener and each end-of-turn marker."""
    spec: dict[str, Any] = {
        "reasoning": {"mode": "tag", "start": "<think>", "end": "</think>"},
        "content": {"mode": "plain", "start": None, "end": None},
        "tools": {"format": "tagged", "call": {"start": "<call>", "parts": []}},
    }
    markers = {marker for _, marker in _markers(spec, ["<|end|>", "<|eot|>"])}
    assert {"<think>", "</think>", "<call>", "<|end|>", "<|eot|>"} <= markers
    spec["reasoning"]["mode"] = "none"
    spec["tools"] = {"format": "none"}
    assert {marker for _, marker in _markers(spec, [])} == set()


# --- (d) black leaves the text as it is -------------------------------------------------


@pytest.mark.parametrize("path", MODULES, ids=_ids(MODULES))
def test_black_stable(path):
    black = pytest.importorskip("black")
    text = _source(path)
    mode = black.Mode(line_length=88, target_versions={black.TargetVersion.PY311})
    assert black.format_str(text, mode=mode) == text


# --- (e) the standard library's ast, json and re only -----------------------------------


@pytest.mark.parametrize("path", MODULES, ids=_ids(MODULES))
def test_imports_only_ast_json_re(path):
    imported = set()
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Import):
            imported |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add("." * node.level + (node.module or ""))
    assert imported <= ALLOWED_IMPORTS, sorted(imported - ALLOWED_IMPORTS)
    # nor a way around the import statement
    assert not _read(_tree(path)) & {"__import__", "importlib", "exec", "eval"}


# --- the checks above catch what they are for -------------------------------------------

SAMPLE = ROOT / "generated" / "qwen3_coder.py"


def _mutant(tmp_path, old, new, count=1):
    text = _source(SAMPLE)
    assert text.count(old) >= 1, old
    path = tmp_path / SAMPLE.name
    path.write_text(text.replace(old, new, count), encoding="utf-8")
    return path


def test_an_unused_definition_is_caught(tmp_path):
    path = _mutant(
        tmp_path,
        "\n\ndef _skip_space(",
        "\n\ndef _orphan(x):\n    return _orphan(x)\n\n\ndef _skip_space(",
    )
    with pytest.raises(AssertionError, match="_orphan"):
        test_no_unused_top_level_definitions(path)


def test_an_uncalled_private_method_is_caught(tmp_path):
    path = _mutant(
        tmp_path,
        "    def feed(self, chunk):",
        "    def _a(self):\n        return self._b()\n\n"
        "    def _b(self):\n        return self._a()\n\n"
        "    def _c(self):\n        pass\n\n"
        "    def feed(self, chunk):",
    )
    with pytest.raises(AssertionError, match="_c"):
        test_stream_parser_has_no_uncalled_private_methods(path)
    (tmp_path / "b").mkdir()
    path = tmp_path / "b" / SAMPLE.name  # a new path: the parse caches are per path
    path.write_text(
        _source(path.parent.parent / SAMPLE.name).replace(
            "    def _c(self):\n        pass\n\n", ""
        ),
        encoding="utf-8",
    )
    with pytest.raises(AssertionError, match="'_a', '_b'"):
        test_stream_parser_has_no_uncalled_private_methods(path)


def test_a_docstring_without_a_marker_is_caught(tmp_path):
    path = _mutant(tmp_path, "End of turn: '<|im_end|>'.", "End of turn: marked.")
    with pytest.raises(AssertionError, match="STOP"):
        test_docstring_states_the_format(path)


def test_a_module_black_would_change_is_caught(tmp_path):
    path = _mutant(tmp_path, "def _skip_space(text, at):", "def _skip_space( text,at ):")
    with pytest.raises(AssertionError):
        test_black_stable(path)


@pytest.mark.parametrize("statement", ["import os", "from . import x", "__import__('os')"])
def test_other_imports_are_caught(tmp_path, statement):
    path = _mutant(tmp_path, "import json\n", f"import json\n{statement}\n")
    with pytest.raises(AssertionError):
        test_imports_only_ast_json_re(path)
