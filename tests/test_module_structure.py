"""The structure of generated/: format modules that are their format, one runtime.

- A format module is data plus bindings: its docstring states the format; then the
  import of the runtime (the package's, or the file beside it: the one block codegen
  writes, the same everywhere), ``__all__``, constants written as literals, and one
  statement that binds its public names from the runtime. It defines no function or
  class, and imports nothing but the runtime and what finds it.
- The runtime (generated/_runtime.py) imports only the standard library; every one of
  its definitions is used, by the public names or by another definition that is; every
  format constant it declares is read by its code or is public data; its StreamParser
  has no private method that nothing calls.
- black leaves every file as it is.

(That a module regenerated from its spec gives the committed bytes is checked by
tests/test_generated.py; that the modules import with the standard library alone, in a
fresh interpreter, too.)
"""

from __future__ import annotations

import ast
import functools
import sys
from pathlib import Path
from typing import Any

import pytest

from compiler.codegen import module as module_codegen
from compiler.runtime import binding, format as format_constants

ROOT = Path(__file__).resolve().parent.parent
PACKAGE_FILES = ("__init__.py", "_runtime.py")
MODULES = sorted(
    path for path in (ROOT / "generated").glob("*.py") if path.name not in PACKAGE_FILES
)
RUNTIME = ROOT / "generated" / "_runtime.py"
# What the runtime may import: the standard library's modules it needs.
RUNTIME_IMPORTS = {"__future__", "ast", "copy", "json", "re", "sys", "typing", "warnings"}
# What the runtime's own machinery uses, besides the public names.
RUNTIME_ENTRY = {"bind", "INTERFACE"}


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
    names = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Load, ast.Del)):
            names.add(n.id)
        elif isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.isidentifier():
            names.add(n.value)  # a name looked up by its string (PUBLIC, _given)
    return names


def test_there_are_modules():
    assert len(MODULES) >= 60
    assert RUNTIME.is_file()


# --- a format module is data plus bindings --------------------------------------------


def _imports(tree: ast.Module) -> set[str]:
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            names = ",".join(alias.name for alias in node.names)
            imported.add("." * node.level + (node.module or "") + f":{names}")
    return imported


@pytest.mark.parametrize("path", MODULES, ids=_ids(MODULES))
def test_a_format_module_is_data_and_bindings(path):
    tree = _tree(path)
    body = tree.body
    assert isinstance(body[0], ast.Expr), "the module opens with its docstring"
    binds = [
        node
        for node in body
        if isinstance(node, ast.Assign)
        and isinstance(node.value, ast.Call)
        and ast.unparse(node.value.func) == "_runtime.bind"
    ]
    assert len(binds) == 1, "one statement binds the public names from the runtime"
    (target,) = binds[0].targets
    assert isinstance(target, ast.Tuple)
    assert [ast.unparse(name) for name in target.elts] == list(binding.PUBLIC)
    # The runtime's import: the one block that codegen writes, the same in every
    # module (a package's runtime, else the file beside the module: issue 32).
    imports = [node for node in body if isinstance(node, ast.If)]
    assert [ast.dump(node) for node in imports] == [
        ast.dump(node) for node in ast.parse(module_codegen.RUNTIME_IMPORT).body
    ]
    problems = []
    for node in body[1:]:
        if node is binds[0] or node in imports:
            continue
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            continue
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            if isinstance(node.value, ast.Name):  # one grammar named twice
                continue
            try:
                ast.literal_eval(node.value)
            except ValueError:
                problems.append(f"line {node.lineno}: not a literal")
            continue
        problems.append(f"line {node.lineno}: {type(node).__name__}")
    assert not problems, problems
    assert _imports(ast.Module(body=body[1:], type_ignores=[])) - _imports(
        ast.Module(body=imports, type_ignores=[])
    ) == {"__future__:annotations"}
    rest = ast.Module(body=[node for node in body if node not in imports], type_ignores=[])
    assert not _read(rest) & {"__import__", "importlib", "exec", "eval"}


@pytest.mark.parametrize("path", MODULES, ids=_ids(MODULES))
def test_everything_public_is_defined(path):
    tree = _tree(path)
    defined = set().union(*(_defined(node) for node in tree.body))
    assert set(_top_value(tree, "__all__")) == set(module_codegen.PUBLIC) <= defined


@pytest.mark.parametrize("path", MODULES, ids=_ids(MODULES))
def test_a_format_module_sets_only_declared_constants(path):
    """A misspelt constant would be left out by bind, silently."""
    tree = _tree(path)
    written = set().union(*(_defined(node) for node in tree.body if not isinstance(node, ast.If)))
    extra = written - set(format_constants.FORMAT_NAMES) - set(binding.PUBLIC) - {"__all__"}
    assert not extra, sorted(extra)


# --- the runtime: the standard library, nothing unused ----------------------------------


def _runtime_names(tree: ast.Module) -> dict[str, list[ast.stmt]]:
    names: dict[str, list[ast.stmt]] = {}
    for node in tree.body:
        for name in _defined(node):
            names.setdefault(name, []).append(node)
    return names


def unused_runtime_definitions(path: Path) -> list[str]:
    """The runtime's top-level names that neither the public names nor the runtime's
    own machinery reach, through the definitions that read them."""
    tree = _tree(path)
    names = _runtime_names(tree)
    reached = set(module_codegen.PUBLIC) | RUNTIME_ENTRY
    # Statements that are no definition (module-level code) run at import: they count.
    work = [node for node in tree.body if not _defined(node)]
    work += [node for name in reached for node in names.get(name, ())]
    seen: set[int] = set()
    while work:
        node = work.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        for name in _read(node) & set(names) - reached:
            reached.add(name)
            work.extend(names[name])
    return sorted(set(names) - reached - {"__all__"})


def test_every_runtime_definition_is_used():
    assert not unused_runtime_definitions(RUNTIME)


def test_every_format_constant_is_read_or_public():
    tree = _tree(RUNTIME)
    read: set[str] = set()
    for node in tree.body:
        # A declaration reads its own name (as the string _given looks up): not a use.
        if isinstance(node, ast.AnnAssign) and "_given" in _read(node):
            continue
        read |= _read(node)
    unread = set(format_constants.FORMAT_NAMES) - read - set(module_codegen.PUBLIC_DATA)
    assert not unread, sorted(unread)


def test_the_runtime_imports_only_the_standard_library():
    imported = {name.split(":")[0] for name in _imports(_tree(RUNTIME))}
    assert imported <= RUNTIME_IMPORTS, sorted(imported - RUNTIME_IMPORTS)
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}


def _self_attributes(node: ast.AST) -> set[str]:
    return {
        n.attr
        for n in ast.walk(node)
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self"
    }


def uncalled_private_methods(path: Path) -> list[str]:
    tree = _tree(path)
    (cls,) = [
        node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "StreamParser"
    ]
    methods = {node.name: node for node in cls.body if isinstance(node, ast.FunctionDef)}
    private = {name for name in methods if name.startswith("_") and not name.startswith("__")}
    # A private attribute read outside the class counts as a way in.
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
    return sorted(private - reached)


def test_stream_parser_has_no_uncalled_private_methods():
    assert not uncalled_private_methods(RUNTIME)


# --- the docstring states the format ----------------------------------------------------


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
    # (no corpus source gives an eos or a tokenizer: the headers of the messages that
    # may follow a turn end it too)
    ends = spec["end_of_turn"]
    # (a marker a call's opener begins with is no stop string: TURN_END_ALSO)
    try:
        also = list(_top_value(tree, "TURN_END_ALSO"))
    except LookupError:
        also = []
    wanted = list(dict.fromkeys(ends["markers"] + ends.get("next_headers", [])))
    assert stop == [marker for marker in wanted if marker not in also]
    missing = [
        (where, marker)
        for where, marker in _markers(spec, stop + also)
        if repr(marker) not in head
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


# --- black leaves the text as it is -------------------------------------------------------

EVERY_FILE = [*MODULES, RUNTIME]


@pytest.mark.parametrize("path", EVERY_FILE, ids=_ids(EVERY_FILE))
def test_black_stable(path):
    black = pytest.importorskip("black")
    text = _source(path)
    mode = black.Mode(line_length=88, target_versions={black.TargetVersion.PY311})
    assert black.format_str(text, mode=mode) == text


# --- the checks above catch what they are for -------------------------------------------

SAMPLE = ROOT / "generated" / "qwen3_coder.py"


def _mutant(tmp_path, old, new, source=SAMPLE):
    text = _source(source)
    assert text.count(old) >= 1, old
    path = tmp_path / source.name
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    return path


def test_code_in_a_format_module_is_caught(tmp_path):
    path = _mutant(tmp_path, "\n# The format.\n", "\n\ndef helper():\n    return 1\n\n\n# The format.\n")
    with pytest.raises(AssertionError, match="FunctionDef"):
        test_a_format_module_is_data_and_bindings(path)


@pytest.mark.parametrize("statement", ["import os", "from . import x"])
def test_other_imports_in_a_format_module_are_caught(tmp_path, statement):
    path = _mutant(tmp_path, "\n__all__ = [", f"\n{statement}\n\n__all__ = [")
    with pytest.raises(AssertionError):
        test_a_format_module_is_data_and_bindings(path)


def test_a_misspelt_constant_is_caught(tmp_path):
    path = _mutant(tmp_path, "\nHAS_CALLS: bool = True\n", "\nHAS_CALL: bool = True\n")
    with pytest.raises(AssertionError, match="HAS_CALL"):
        test_a_format_module_sets_only_declared_constants(path)


def test_an_unused_runtime_definition_is_caught(tmp_path):
    path = _mutant(
        tmp_path,
        "\n\ndef _skip_space(",
        "\n\ndef _orphan(x):\n    return _orphan(x)\n\n\ndef _skip_space(",
        source=RUNTIME,
    )
    assert unused_runtime_definitions(path) == ["_orphan"]


def test_an_uncalled_private_method_is_caught(tmp_path):
    path = _mutant(
        tmp_path,
        '    def feed(self, chunk):\n        """The deltas',
        "    def _a(self):\n        return self._b()\n\n"
        "    def _b(self):\n        return self._a()\n\n"
        '    def feed(self, chunk):\n        """The deltas',
        source=RUNTIME,
    )
    assert uncalled_private_methods(path) == ["_a", "_b"]


def test_a_docstring_without_a_marker_is_caught(tmp_path):
    path = _mutant(tmp_path, "End of turn: '<|im_end|>', ", "End of turn: ")
    with pytest.raises(AssertionError, match="STOP"):
        test_docstring_states_the_format(path)


def test_a_module_black_would_change_is_caught(tmp_path):
    path = _mutant(tmp_path, "HAS_CALLS: bool = True", "HAS_CALLS:bool=True")
    with pytest.raises(AssertionError):
        test_black_stable(path)


def test_other_imports_in_the_runtime_are_caught(tmp_path, monkeypatch):
    path = _mutant(tmp_path, "import json\n", "import json\nimport yaml\n", source=RUNTIME)
    monkeypatch.setattr(sys.modules[__name__], "RUNTIME", path)
    with pytest.raises(AssertionError, match="yaml"):
        test_the_runtime_imports_only_the_standard_library()
