"""compiler/runtime/ → the text of generated/_runtime.py, the one runtime every format
module of a generated folder runs on, and the runtime part of a standalone module.

The runtime's modules are written one after another as one module: their own text,
less their imports of each other (one namespace holds them all), under a comment that
carries each module's docstring. Nothing is folded or left out: a change to the runtime
changes this one file, and no format module.
"""

from __future__ import annotations

import ast
import functools
import types
from pathlib import Path

import black

from .. import __version__
from ..runtime import binding

RUNTIME = Path(__file__).resolve().parent.parent / "runtime"
# The runtime's modules, in the order they are written: each after those whose names
# it reads when it runs (binding first, then the format it reads).
MODULES = (
    "binding",
    "format",
    "text",
    "values",
    "tools",
    "calls",
    "parse",
    "stream",
    "schema_gbnf",
    "grammar",
    "structural_tag",
    "lark",
    "prepare",
)
# What only the shared runtime needs: a standalone module holds its format already.
SHARED_ONLY = ("binding",)
MODE = black.Mode(line_length=88, target_versions={black.TargetVersion.PY311})


class RuntimeLayoutError(Exception):
    """The runtime's modules cannot be written as one (a compiler bug)."""


def _section(name: str) -> tuple[str, list[str]]:
    """One runtime module as a section of the one module: (its text under a comment
    that carries its docstring, without its imports; its standard-library imports)."""
    path = RUNTIME / f"{name}.py"
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    tree = ast.parse(text)
    imports, cut = [], []
    body = tree.body
    doc = ast.get_docstring(tree, clean=True) if body else None
    if doc is not None:
        cut.append(body[0])
    for node in body:
        if isinstance(node, ast.ImportFrom) and node.level:
            cut.append(node)  # another runtime module: the same namespace here
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            if isinstance(node, ast.ImportFrom) and node.module == "__future__":
                cut.append(node)
                continue
            imports.append(ast.get_source_segment(text, node) or "")
            cut.append(node)
    dropped: set[int] = set()
    for node in cut:
        dropped.update(range(node.lineno - 1, (node.end_lineno or node.lineno)))
    kept = "".join(line for index, line in enumerate(lines) if index not in dropped)
    header = [f"# {'-' * 78}", f"# compiler/runtime/{name}.py"]
    header += [f"# {line}".rstrip() for line in (doc or "").splitlines()]
    # Laid out as black lays it out: two blank lines between the header and the code.
    return "\n".join(header) + "\n\n\n" + kept.strip("\n") + "\n", imports


def _defined(name: str) -> set[str]:
    """The names a runtime module defines at its top level."""
    tree = ast.parse((RUNTIME / f"{name}.py").read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            for child in ast.walk(node):
                if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Store):
                    names.add(child.id)
    return names


def _check_one_namespace(modules: tuple[str, ...]) -> None:
    """Two modules that define one name would overwrite each other in one module."""
    seen: dict[str, str] = {}
    for module in modules:
        for name in _defined(module):
            if name in seen and name != "__all__":
                raise RuntimeLayoutError(
                    f"compiler/runtime/{module}.py and {seen[name]}.py both define {name!r}: "
                    "the runtime is written as one module, so names must be unique"
                )
            seen[name] = module


def _join(modules: tuple[str, ...]) -> tuple[str, str]:
    """(the standard-library imports of ``modules``, their sections)."""
    _check_one_namespace(modules)
    imports: list[str] = []
    sections = []
    for module in modules:
        section, needs = _section(module)
        sections.append(section)
        imports.extend(needs)
    ordered = sorted(dict.fromkeys(imports), key=lambda line: (line.startswith("from"), line))
    return "\n".join(ordered) + "\n", "\n\n".join(sections)


@functools.cache
def shared() -> str:
    """The text of generated/_runtime.py."""
    imports, sections = _join(MODULES)
    doc = (
        '"""The runtime every format module in this folder runs on (runtime interface '
        f"{binding.INTERFACE}).\n\n"
        "A format module (<slug>.py) holds its format's constants and calls ``bind``,\n"
        "which runs this module's code in a namespace of its own that starts with those\n"
        "constants and hands back the module's parse, StreamParser and exports.\n\n"
        f"Generated by `chatfmt build` (chatfmt {__version__}) from\n"
        "compiler/runtime/, whose modules follow one another below. Do not edit it:\n"
        "change compiler/runtime/ and rebuild.\n"
        '"""\n'
    )
    # Not formatted here: compiler/runtime/ is black's already (the structure test
    # checks the result), and formatting 5,000 lines would take seconds of each build.
    return doc + "\nfrom __future__ import annotations\n\n" + imports + "\n" + sections


@functools.cache
def standalone_parts() -> tuple[str, str]:
    """(the standard-library imports, the sections) of the runtime as a standalone
    module holds it, after its format's constants."""
    imports, sections = _join(tuple(m for m in MODULES if m not in SHARED_ONLY))
    return imports, sections


@functools.cache
def in_memory() -> types.ModuleType:
    """The runtime as a module made in memory (not written anywhere, not formatted):
    what ``module.load`` binds a format to."""
    imports, sections = _join(MODULES)
    code = compile(
        "from __future__ import annotations\n" + imports + sections, "<chatfmt runtime>", "exec"
    )
    runtime = types.ModuleType("_chatfmt_runtime")
    exec(code, runtime.__dict__)
    return runtime
