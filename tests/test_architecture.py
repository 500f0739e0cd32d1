"""Data flows one way: template → analysis → spec → typed model → emitters.

The emitters (compiler/codegen/) read the typed model and the runtime, never the
analysis; rendering does not depend on where templates come from; the runtime imports
nothing of the compiler outside itself (it is written into generated/ as it is).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

COMPILER = Path(__file__).resolve().parent.parent / "compiler"
# What the emitters may import of the compiler: the model and what it is made of.
CODEGEN_MAY_IMPORT = {
    "compiler",  # its __version__
    "compiler.model",
    "compiler.call_shapes",
    "compiler.charclass",
    "compiler.quoted_strings",  # where a string ends, read off the model
    "compiler.polyfills",
    "compiler.spec",
    "compiler.runtime",
    "compiler.codegen",
}


def imports_of(path: Path) -> set[str]:
    """The compiler modules ``path`` imports, as absolute names (a name imported from
    a package counts as that package's module where one of that name exists)."""
    package = ".".join(path.relative_to(COMPILER.parent).with_suffix("").parts[:-1])
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.add(module)
            for alias in node.names:
                candidate = COMPILER.parent / Path(*f"{module}.{alias.name}".split("."))
                if candidate.with_suffix(".py").is_file() or candidate.is_dir():
                    found.add(f"{module}.{alias.name}")
    return {name for name in found if name.split(".")[0] == "compiler"}


def _allowed(name: str, allowed: set[str]) -> bool:
    """``name`` is one of ``allowed`` or inside one of its packages (the compiler's
    own package only as itself)."""
    packages = allowed - {"compiler"}
    return name in allowed or any(name.startswith(package + ".") for package in packages)


CODEGEN = sorted((COMPILER / "codegen").glob("*.py"))


@pytest.mark.parametrize("path", CODEGEN, ids=[path.stem for path in CODEGEN])
def test_the_emitters_read_the_model_not_the_analysis(path):
    outside = sorted(name for name in imports_of(path) if not _allowed(name, CODEGEN_MAY_IMPORT))
    assert not outside, outside


def test_rendering_does_not_depend_on_where_templates_come_from():
    assert "compiler.sources" not in imports_of(COMPILER / "render.py")


RUNTIME = sorted((COMPILER / "runtime").glob("*.py"))


@pytest.mark.parametrize("path", RUNTIME, ids=[path.stem for path in RUNTIME])
def test_the_runtime_imports_only_itself(path):
    outside = sorted(
        name for name in imports_of(path) if not name.startswith("compiler.runtime")
    )
    assert not outside, outside


def test_an_import_of_the_analysis_is_caught(tmp_path):
    (tmp_path / "compiler" / "codegen").mkdir(parents=True)
    fake = tmp_path / "compiler" / "codegen" / "x.py"
    fake.write_text("from .. import triggers\nfrom ..analyze import content\n", encoding="utf-8")
    global COMPILER
    saved, COMPILER = COMPILER, tmp_path / "compiler"
    try:
        (tmp_path / "compiler" / "triggers.py").write_text("", encoding="utf-8")
        (tmp_path / "compiler" / "analyze").mkdir()
        found = imports_of(fake)
    finally:
        COMPILER = saved
    assert {"compiler.triggers", "compiler.analyze"} <= found
    assert not _allowed("compiler.triggers", CODEGEN_MAY_IMPORT)
    assert not _allowed("compiler.analyze.content", CODEGEN_MAY_IMPORT)
