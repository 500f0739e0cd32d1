"""generated/ as one runtime and format modules (issue 23), and exports that fail alone
(issue 22).

- A change to compiler/runtime/ changes generated/_runtime.py and no format module; a
  bump of the runtime interface rewrites every module.
- A format module and a runtime of different interfaces refuse each other with an
  ImportError naming both.
- A format module imports as part of a package and from a plain folder on sys.path,
  even one whose name is no identifier.
- ``export standalone`` gives one file that imports with the standard library alone
  and parses like the package module.
- An export whose emitter fails costs that export only: the module is written, parse
  works, the export's function raises ValueError naming it, the build warns and exits 0.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from compiler import build as build_module, model, spec as specs
from compiler.codegen import lark as lark_rules, module as module_codegen, runtime_module
from compiler.runtime import binding
from tests import roundtrip as rt

ROOT = Path(__file__).resolve().parent.parent
GENERATED = ROOT / "generated"
SAMPLES = ("qwen3_coder", "nousresearch_hermes_2_pro_llama_3_8b_tool_use", "openai_gpt_oss_120b")


def _committed() -> dict[str, bytes]:
    names = [*build_module.package_files(), *(f"{slug}.{kind}" for slug in SAMPLES for kind in (
        "py", "gbnf", "tools.gbnf", "response_template.json"))]
    return {name: (GENERATED / name).read_bytes() for name in names if (GENERATED / name).is_file()}


def _regenerated() -> dict[str, bytes]:
    """The package's files and the samples' files, made again from the committed specs
    (no analysis; tests/test_generated.py rebuilds everything from the templates)."""
    files: dict[str, str | None] = dict(build_module.package_files())
    for slug in SAMPLES:
        spec_path = ROOT / "specs" / f"{slug}.yaml"
        files.update(build_module.outputs(slug, specs.load(str(spec_path)), str(spec_path)))
    return {name: text.encode("utf-8") for name, text in files.items() if text is not None}


def _changed(before: dict[str, bytes], after: dict[str, bytes]) -> set[str]:
    return {name for name in before.keys() | after.keys() if before.get(name) != after.get(name)}


@pytest.fixture
def fresh_caches():
    """The runtime's text and the declarations are read once per process: read them
    again for this test, and after it."""
    caches = (runtime_module.shared, runtime_module.standalone_parts, module_codegen._declarations)
    for cache in caches:
        cache.cache_clear()
    yield
    for cache in caches:
        cache.cache_clear()


def test_the_committed_files_are_what_the_specs_make():
    assert _changed(_committed(), _regenerated()) == set()


def test_a_runtime_edit_changes_the_runtime_alone(tmp_path, monkeypatch, fresh_caches):
    runtime = tmp_path / "runtime"
    shutil.copytree(runtime_module.RUNTIME, runtime)
    text = (runtime / "text.py").read_text(encoding="utf-8")
    marked = text.replace("\n\ndef ", "\n\n# A comment added by the test.\ndef ", 1)
    assert marked != text
    (runtime / "text.py").write_text(marked, encoding="utf-8")
    monkeypatch.setattr(runtime_module, "RUNTIME", runtime)
    changed = _changed(_committed(), _regenerated())
    assert changed == {"_runtime.py"}


def test_an_interface_bump_rewrites_every_module(monkeypatch, fresh_caches):
    monkeypatch.setattr(binding, "INTERFACE", binding.INTERFACE + 1)
    changed = _changed(_committed(), _regenerated())
    modules = {f"{slug}.py" for slug in SAMPLES}
    assert changed == modules | {"_runtime.py"}


def _python(code: str, cwd: Path, *flags: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *flags, "-c", textwrap.dedent(code)],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )


def _folder(tmp_path: Path, name: str) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    for file in ("_runtime.py", *(f"{slug}.py" for slug in SAMPLES)):
        shutil.copy(GENERATED / file, folder / file)
    return folder


CALL = (
    "<tool_call>\n<function=get_weather>\n<parameter=city>\nBerlin\n</parameter>\n"
    "</function>\n</tool_call>"
)


def test_a_module_imports_from_a_folder_whose_name_is_no_identifier(tmp_path):
    folder = _folder(tmp_path, "my-parsers")
    done = _python(
        f"""
        import sys
        sys.path.insert(0, {str(folder)!r})
        import qwen3_coder
        print(qwen3_coder.parse({CALL!r})["tool_calls"][0]["function"]["arguments"])
        """,
        tmp_path,
        "-S",
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"city": "Berlin"}


def test_a_module_imports_as_part_of_a_package(tmp_path):
    folder = _folder(tmp_path, "parsers")
    shutil.copy(GENERATED / "__init__.py", folder / "__init__.py")
    done = _python(
        f"""
        from parsers import qwen3_coder
        print(qwen3_coder.parse({CALL!r})["tool_calls"][0]["function"]["name"])
        """,
        tmp_path,
        "-S",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "get_weather"


def test_two_folders_on_sys_path_each_run_their_own_runtime(tmp_path):
    """Issue 32, item 5: a module imported from a plain folder ran ``import
    _runtime`` and got the first _runtime on sys.path: folder b's modules ran
    folder a's runtime, silently, both being of one interface. Each runtime here
    says which folder it is from; each module runs the one beside it, and the
    modules of one folder share theirs."""
    first, second = _folder(tmp_path, "a"), _folder(tmp_path, "b")
    (first / "nousresearch_hermes_2_pro_llama_3_8b_tool_use.py").unlink()
    (first / "openai_gpt_oss_120b.py").unlink()
    (second / "qwen3_coder.py").unlink()
    for folder in (first, second):
        runtime = folder / "_runtime.py"
        runtime.write_text(
            runtime.read_text(encoding="utf-8") + f"\nFOLDER = {folder.name!r}\n",
            encoding="utf-8",
        )
    call = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Berlin"}}\n</tool_call>'
    done = _python(
        f"""
        import json, sys
        sys.path[:0] = [{str(first)!r}, {str(second)!r}]
        import qwen3_coder
        import nousresearch_hermes_2_pro_llama_3_8b_tool_use as hermes
        import openai_gpt_oss_120b as gpt_oss
        print(json.dumps([
            qwen3_coder._runtime.FOLDER, hermes._runtime.FOLDER, gpt_oss._runtime.FOLDER,
            hermes._runtime is gpt_oss._runtime,
            hermes.parse({call!r})["tool_calls"][0]["function"]["arguments"],
        ]))
        """,
        tmp_path,
        "-S",
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == ["a", "b", "b", True, '{"city": "Berlin"}']


def test_a_module_refuses_a_runtime_of_another_interface(tmp_path):
    folder = _folder(tmp_path, "parsers")
    runtime = folder / "_runtime.py"
    text = runtime.read_text(encoding="utf-8")
    line = f"\nINTERFACE = {binding.INTERFACE}\n"
    assert line in text
    runtime.write_text(text.replace(line, "\nINTERFACE = 999\n"), encoding="utf-8")
    done = _python(
        f"import sys; sys.path.insert(0, {str(folder)!r}); import qwen3_coder", tmp_path, "-S"
    )
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError:")
    assert f"interface {binding.INTERFACE}" in last and "interface 999" in last


# --- one file, on request ----------------------------------------------------------------


def _format(slug: str) -> model.Format:
    path = ROOT / "specs" / f"{slug}.yaml"
    return model.build(specs.load(str(path)), slug=slug, origin=str(path))


def _texts(slug: str) -> list[dict]:
    texts = []
    for kind in rt.ALL_KINDS:
        case = rt.make_case(slug, kind)
        if case is not None:
            texts.append(
                {"text": case.text, "tools": case.tools, "thinking": case.kind.enable_thinking}
            )
    return texts


STANDALONE_RUN = """
import importlib.util, json, sys
for name in ("compiler", "generated", "yaml", "jinja2"):
    try:
        __import__(name)
    except ImportError:
        pass
    else:
        raise SystemExit(name + " could be imported")
spec = importlib.util.spec_from_file_location("parser", sys.argv[1])
parser = importlib.util.module_from_spec(spec)
spec.loader.exec_module(parser)
results = []
for case in json.load(open(sys.argv[2], encoding="utf-8")):
    message = parser.parse(case["text"], tools=case["tools"], enable_thinking=case["thinking"])
    stream = parser.StreamParser(tools=case["tools"], enable_thinking=case["thinking"])
    deltas = []
    for at in range(0, len(case["text"]), 3):
        deltas += stream.feed(case["text"][at : at + 3])
    deltas += stream.finish()
    results.append([message, deltas])
print(json.dumps(results))
"""


@pytest.mark.parametrize("slug", SAMPLES)
def test_the_standalone_module_imports_alone_and_parses_like_the_package_one(slug, tmp_path):
    standalone = tmp_path / f"{slug}_standalone.py"
    standalone.write_text(module_codegen.standalone(_format(slug)), encoding="utf-8")
    cases = _texts(slug)
    assert cases
    (tmp_path / "cases.json").write_text(json.dumps(cases), encoding="utf-8")
    (tmp_path / "run.py").write_text(STANDALONE_RUN, encoding="utf-8")
    # -S -I: no site-packages (so no compiler, jinja2 or yaml), no current folder.
    done = subprocess.run(
        [sys.executable, "-S", "-I", "run.py", str(standalone), "cases.json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    package = rt.module(slug)
    expected = []
    for case in cases:
        message = package.parse(case["text"], tools=case["tools"], enable_thinking=case["thinking"])
        stream = package.StreamParser(tools=case["tools"], enable_thinking=case["thinking"])
        deltas = []
        for at in range(0, len(case["text"]), 3):
            deltas += stream.feed(case["text"][at : at + 3])
        deltas += stream.finish()
        expected.append([message, deltas])
    assert json.loads(done.stdout) == json.loads(json.dumps(expected))


def test_the_standalone_module_is_the_format_then_the_runtime():
    text = module_codegen.standalone(_format("qwen3_coder"))
    assert text.startswith('"""Output parser for the \'qwen3_coder\' chat format.')
    assert "_runtime" not in text.split("# The runtime (compiler/runtime/)")[0]
    assert "def bind(" not in text  # the shared runtime's machinery stays out
    black = pytest.importorskip("black")
    assert black.format_str(text, mode=module_codegen._MODE) == text


# --- exports fail alone (issue 22) --------------------------------------------------------


def test_every_corpus_module_has_every_export():
    missing = {slug: rt.module(slug).MISSING_EXPORTS for slug in rt.slugs()}
    assert {slug: why for slug, why in missing.items() if why} == {}


def test_a_failing_export_costs_that_export_alone(tmp_path, monkeypatch, capsys):
    from compiler.__main__ import main

    def broken(fmt):
        raise RuntimeError("the Lark emitter broke")

    monkeypatch.setattr(lark_rules, "build", broken)
    template = ROOT / "templates" / "Qwen3-Coder.jinja"
    if not template.is_file():
        pytest.skip("no corpus: run make templates")
    specs_dir, generated = tmp_path / "specs", tmp_path / "generated"
    os.makedirs(specs_dir)
    shutil.copy(ROOT / "specs" / "qwen3_coder.yaml", specs_dir / "qwen3_coder.yaml")
    templates = tmp_path / "templates"
    templates.mkdir()
    shutil.copy(template, templates / template.name)
    code = main(
        [
            "build",
            "--templates",
            str(templates),
            "--specs",
            str(specs_dir),
            "--generated",
            str(generated),
        ]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    warnings = [line for line in err.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1
    assert "qwen3_coder" in warnings[0] and "lark" in warnings[0]
    assert "the Lark emitter broke" in warnings[0]
    assert (generated / "qwen3_coder.py").is_file()
    assert (generated / "qwen3_coder.gbnf").is_file()  # the other exports are there
    done = _python(
        f"""
        import sys
        sys.path.insert(0, {str(tmp_path)!r})
        from generated import qwen3_coder as m
        print(m.MISSING_EXPORTS)
        print(m.parse({CALL!r})["tool_calls"][0]["function"]["name"])
        print(len(m.grammar()) > 0, m.structural_tag([])["type"])
        try:
            m.lark_grammar()
        except ValueError as error:
            print("ValueError:", error)
        """,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "lark" in lines[0] and "the Lark emitter broke" in lines[0]
    assert lines[1:3] == ["get_weather", "True structural_tag"]
    assert lines[3].startswith("ValueError: this module has no lark export")
    assert "the Lark emitter broke" in lines[3]


def test_a_failing_grammar_export_writes_no_grammar_file(monkeypatch):
    from compiler.codegen import gbnf

    def broken(fmt, **options):
        raise RuntimeError("the GBNF emitter broke")

    monkeypatch.setattr(gbnf, "build", broken)
    made = module_codegen.generate(_format("qwen3_coder"))
    assert set(made.missing) == {"gbnf"}
    files = made.files("qwen3_coder")
    assert files["qwen3_coder.gbnf"] is None and files["qwen3_coder.tools.gbnf"] is None
    parser = module_codegen.load(_format("qwen3_coder"))
    assert parser.parse(CALL)["tool_calls"][0]["function"]["name"] == "get_weather"
    for function in (parser.grammar, parser.tool_call_grammar):
        with pytest.raises(ValueError, match="no gbnf export"):
            function()
    assert parser.lark_grammar().startswith("%llguidance")


# --- the build in worker processes ----------------------------------------------------------


def test_a_build_in_workers_writes_and_logs_what_one_process_does(tmp_path):
    from compiler.sources import discover

    templates = tmp_path / "templates"
    templates.mkdir()
    for name in ("Qwen3-Coder.jinja", "google-gemma-2-2b-it.jinja", "Qwen-QwQ-32B.jinja"):
        if not (ROOT / "templates" / name).is_file():
            pytest.skip("no corpus: run make templates")
        shutil.copy(ROOT / "templates" / name, templates / name)
    (templates / "broken.jinja").write_text("{% if %}\n", encoding="utf-8")
    runs = {}
    for jobs in (1, 2):
        out = tmp_path / f"jobs{jobs}"
        lines: list[str] = []
        report = build_module.build(
            discover(str(templates)), str(out / "specs"), str(out / "generated"),
            log=lines.append, jobs=jobs,
        )  # fmt: skip
        files = {
            path.relative_to(out).as_posix(): path.read_bytes()
            for path in sorted(out.rglob("*"))
            if path.is_file()
        }
        runs[jobs] = (lines, report.failures, report.warnings, files)
    assert runs[1][1] and runs[1][1][0].startswith(str(templates / "broken.jinja"))
    assert runs[2] == runs[1]
