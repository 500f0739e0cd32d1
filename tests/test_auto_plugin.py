"""What an auto plugin (``python -m compiler plugin vllm|sglang --auto``) does at start-up,
without a server: compiler/codegen/auto_start.py, the text every auto plugin runs.

It finds a reviewed spec by the template's sha256, else the cached analysis, else
analyses the template with the compiler in a subprocess (counted here through a wrapper
interpreter that logs each run), writes files whole, refuses in one line, and hands
its result to the server's child processes. The servers themselves drive the plugins
in tests/servers/test_auto_plugin.py (``make test-servers``).
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from compiler import model
from compiler import spec as specs
from compiler.__main__ import main
from compiler.codegen import auto_lookup, auto_start, plugin_sglang, plugin_vllm
from compiler.codegen.module import standalone
from tests import roundtrip as rt

ROOT = Path(__file__).resolve().parent.parent
QWEN = "qwen_qwen3_0_6b"
QWEN_TEMPLATE = ROOT / "templates" / "Qwen-Qwen3-0.6B.jinja"
# A chat template with no tools and no reasoning: it analyses to nothing the plugin reads.
PLAIN = (
    "{%- for message in messages -%}"
    "{{- '<|' + message.role + '|>\\n' + message.content + '<|end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|assistant|>\\n' -}}{%- endif -%}"
)


def template(text: str, origin: str = "a test") -> auto_start.Template:
    return auto_start.Template(text, None, None, origin)


def qwen() -> auto_start.Template:
    return template(QWEN_TEMPLATE.read_text(encoding="utf-8"), "Qwen3 0.6B")


@pytest.fixture
def python(tmp_path) -> tuple[str, Path]:
    """An interpreter that logs each compiler command it runs, then runs it."""
    log = tmp_path / "runs.log"
    wrapper = tmp_path / "python"
    wrapper.write_text(
        f'#!/bin/sh\nprintf "%s\\n" "$*" >> "{log}"\nexec "{sys.executable}" "$@"\n',
        encoding="utf-8",
    )
    wrapper.chmod(0o755)
    return str(wrapper), log


def runs(log: Path, command: str) -> int:
    """How many compiler runs were ``command`` (analyze, export)."""
    if not log.exists():
        return 0
    return sum(line.split()[2:3] == [command] for line in log.read_text().splitlines())


def logged() -> tuple[list[str], object]:
    lines: list[str] = []
    return lines, lines.append


def without_path(spec: dict) -> dict:
    spec = json.loads(json.dumps(spec))
    spec["template"].pop("path")
    return spec


# --------------------------------------------------------------------------- reviewed specs


def lookup(folder, text: str = "") -> str | None:
    """The reviewed spec the compiler finds in ``folder`` for the template ``text``."""
    return auto_lookup.reviewed_spec(str(folder), auto_start.sha256(text))


def test_every_corpus_spec_is_found_by_its_templates_hash():
    folder = ROOT / "specs"
    for path in sorted(folder.glob("*.yaml")):
        digest = yaml.safe_load(path.read_text(encoding="utf-8"))["template"]["sha256"]
        found = auto_lookup.reviewed_spec(str(folder), digest)
        assert found is not None, path
        # The first by name of the specs for that template (one, but for shared templates).
        recorded = yaml.safe_load(Path(found).read_text(encoding="utf-8"))["template"]
        assert recorded["sha256"] == digest and Path(found).name <= path.name


H1, H2 = "a1" * 32, "b2" * 32


@pytest.mark.parametrize(
    "text",
    [
        f"spec_version: 1\ntemplate: {{path: a.jinja, sha256: {H1}}}\n",
        f"template:\n  path: a.jinja\n  sha256: '{H1}'\nreasoning: {{}}\n",
        f"template:\r\n  path: a.jinja\r\n  sha256: {H1}\r\n",
        f"template:  # the served one\n  sha256: {H1}  # its hash\n",
        f'"template":\n  "sha256": "{H1}"\n',
        f"template:\n    path: a.jinja\n    sha256: >-\n      {H1}\n",
        f"base: &t\n  sha256: {H1}\ntemplate: *t\n",
        f"render_inputs:\n  variables:\n    sha256: {H2}\ntemplate:\n  sha256: {H1}\n",
    ],
    ids=["flow", "quoted", "crlf", "comments", "quoted-keys", "folded", "alias", "elsewhere"],
)
def test_a_reviewed_spec_is_found_by_its_yaml_however_written(tmp_path, text):
    (tmp_path / "a.yaml").write_bytes(text.encode("utf-8"))
    assert auto_lookup.reviewed_spec(str(tmp_path), H1) == str(tmp_path / "a.yaml")
    assert auto_lookup.reviewed_spec(str(tmp_path), H2) is None


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("template: {sha256: [\n", "invalid YAML"),
        ("a: 1\na: 2\n", "duplicate key"),
        ("a: *nowhere\n", "invalid YAML"),
        ("[" * 100 + "]" * 100, "nested"),
        (f"- template: {{sha256: {H1}}}\n", "expected a mapping"),
        (f"render_inputs:\n  variables:\n    sha256: {H1}\n", "records no template hash"),
        (f"template:\n  path: a\nother:\n  sha256: {H1}\n", "records no template hash"),
        ("template:\n  sha256: not-a-digest\n", "records no template hash"),
        (f"template:\n  sha_256: {H1}\n", "records no template hash"),
    ],
    ids=[
        "broken", "duplicate-key", "unknown-alias", "deep", "no-mapping", "no-template",
        "outside", "malformed", "misspelt",
    ],
)
def test_a_file_in_the_reviewed_folder_that_is_no_spec_stops_the_start(
    tmp_path, text, fragment
):
    """It may be the served template's spec: serving the unreviewed analysis instead
    would drop its reviewer's overrides without a word."""
    (tmp_path / "a.yaml").write_text(text, encoding="utf-8")
    shutil.copy(ROOT / "specs" / f"{QWEN}.yaml", tmp_path / "b.yaml")
    with pytest.raises(auto_lookup.LookupFailed) as failed:
        lookup(tmp_path, qwen().text)
    message = str(failed.value)
    assert "\n" not in message and str(tmp_path / "a.yaml") in message and fragment in message
    # After the first spec for the template (the one served), no file is read.
    os.rename(tmp_path / "a.yaml", tmp_path / "c.yaml")
    assert lookup(tmp_path, qwen().text) == str(tmp_path / "b.yaml")


def test_reviewed_spec_is_found_by_the_templates_hash(tmp_path):
    for slug in ("google_gemma_2_2b_it", QWEN, "qwen3_coder"):
        shutil.copy(ROOT / "specs" / f"{slug}.yaml", tmp_path / f"{slug}.yaml")
    (tmp_path / "notes.txt").write_text(auto_start.sha256(qwen().text), encoding="utf-8")
    (tmp_path / "folder.yaml").mkdir()
    assert lookup(tmp_path, qwen().text) == str(tmp_path / f"{QWEN}.yaml")
    assert lookup(tmp_path, PLAIN) is None
    with pytest.raises(auto_lookup.LookupFailed, match="cannot read the reviewed specs folder"):
        lookup(tmp_path / "missing")


@pytest.mark.parametrize("edit", ["crlf", "comment", "quoted-key"])
def test_the_server_serves_a_reviewed_spec_however_its_yaml_is_written(tmp_path, python, edit):
    """A Qwen3-Coder spec saved with CRLF line ends, with a comment after ``template:``
    or with that key quoted: the server serves it (with its reviewer's overrides), never
    its own unreviewed analysis."""
    interpreter, log = python
    text = (ROOT / "specs" / "qwen3_coder.yaml").read_text(encoding="utf-8")
    body = yaml.safe_load(text)
    assert "\ntemplate:\n" in text
    edited = {
        "crlf": text.replace("\n", "\r\n"),
        "comment": text.replace("\ntemplate:\n", "\ntemplate:  # reviewed by a person\n"),
        "quoted-key": text.replace("\ntemplate:\n", '\n"template":\n'),
    }[edit]
    assert yaml.safe_load(edited) == body
    folder = tmp_path / "reviewed"
    folder.mkdir()
    (folder / "mine.yaml").write_bytes(edited.encode("utf-8"))
    served = template((ROOT / "templates" / "Qwen3-Coder.jinja").read_text(encoding="utf-8"))
    found = auto_start.resolve(
        served, specs=str(folder), cache=str(tmp_path / "c"), python=interpreter,
        log=lambda _: None,
    )  # fmt: skip
    assert (found.how, found.spec) == ("reviewed", str(folder / "mine.yaml"))
    assert runs(log, "analyze") == 0


# --------------------------------------------------------------------------- the cache


@pytest.fixture(scope="module")
def corpus_case():
    case = rt.make_case(QWEN, rt.TOOL_KINDS[0])
    assert case is not None
    return case


def parse_with(module_path: str, case) -> dict:
    module = auto_start.load(module_path, f"test_auto_{abs(hash(module_path))}", "<test>")
    return module.parse(case.text, tools=case.tools)


def test_cold_start_analyses_and_a_warm_start_reuses_the_spec(tmp_path, python, corpus_case):
    interpreter, log = python
    cache = tmp_path / "cache"
    lines, say = logged()
    cold = auto_start.resolve(qwen(), specs=None, cache=str(cache), python=interpreter, log=say)
    assert cold.how == "analysed"
    assert (runs(log, "analyze"), runs(log, "export")) == (1, 1)
    # The analysis is the build's: the committed spec but for where the template is.
    analysed = yaml.safe_load(Path(cold.spec).read_text(encoding="utf-8"))
    assert without_path(analysed) == without_path(rt.load_spec(QWEN))
    assert analysed["template"]["path"] == str(Path(cold.spec).parent / "template.jinja")
    assert parse_with(cold.module, corpus_case) == rt.module(QWEN).parse(
        corpus_case.text, tools=corpus_case.tools
    )
    assert len(lines) == 1 and "analysed the chat template" in lines[0]
    assert cold.spec in lines[0] and "python -m compiler explain" in lines[0]

    lines.clear()
    warm = auto_start.resolve(qwen(), specs=None, cache=str(cache), python=interpreter, log=say)
    assert warm == cold._replace(how="cached")
    assert (runs(log, "analyze"), runs(log, "export")) == (1, 1)
    assert len(lines) == 1 and "reusing the unreviewed spec" in lines[0]
    assert cold.spec in lines[0] and "python -m compiler explain" in lines[0]


MINISTRAL_TEMPLATE = ROOT / "templates" / "mistralai-Ministral-3-14B-Reasoning-2512.jinja"


def test_the_cache_tells_apart_models_with_one_template_and_other_tokens(tmp_path, python):
    """Two models share a chat template whose turns end with the tokenizer's eos token,
    each with an eos of its own: each is served the analysis with its own."""
    interpreter, log = python
    text = MINISTRAL_TEMPLATE.read_text(encoding="utf-8")
    cache = str(tmp_path / "cache")
    quiet = {"specs": None, "cache": cache, "python": interpreter, "log": lambda _: None}
    one = auto_start.resolve(auto_start.Template(text, "<s>", "</s>", "model one"), **quiet)
    two = auto_start.resolve(auto_start.Template(text, "<s>", "<|end|>", "model two"), **quiet)
    assert (one.how, two.how) == ("analysed", "analysed")
    assert one.spec != two.spec and one.module != two.module
    for found, eos, label in ((one, "</s>", "one"), (two, "<|end|>", "two")):
        parser = auto_start.load(found.module, f"test_auto_eos_{label}", "<test>")
        assert eos in parser.STOP
        assert parser.parse(f"Hi{eos}", enable_thinking=False)["content"] == "Hi"
    again = auto_start.resolve(auto_start.Template(text, "<s>", "</s>", "model one"), **quiet)
    assert again == one._replace(how="cached")
    # bos counts too: it is given to the analysis.
    other = auto_start.resolve(auto_start.Template(text, "<bos>", "</s>", "model 3"), **quiet)
    assert other.how == "analysed" and other.spec not in (one.spec, two.spec)
    assert runs(log, "analyze") == 3
    # The entry still starts with the template's hash (to find it by in a cache).
    assert Path(one.spec).parent.name.startswith(auto_start.sha256(text) + "-")


@pytest.fixture
def installed_copy(tmp_path) -> tuple[str, Path]:
    """An interpreter that runs a copy of the compiler (as a pip install would place
    it), and that copy's folder: a test may change the compiler without changing ours."""
    site = tmp_path / "site"
    ignored = shutil.ignore_patterns("__pycache__")
    shutil.copytree(ROOT / "compiler", site / "compiler", ignore=ignored)
    shutil.copytree(ROOT / "schema", site / "schema")
    wrapper = tmp_path / "python-with-copy"
    wrapper.write_text(
        f'#!/bin/sh\nPYTHONPATH="{site}" exec "{sys.executable}" "$@"\n', encoding="utf-8"
    )
    wrapper.chmod(0o755)
    where = subprocess.run(
        [str(wrapper), "-c", "import compiler; print(compiler.__file__)"],
        capture_output=True, text=True, cwd=tmp_path, check=True,
    ).stdout.strip()  # fmt: skip
    assert Path(where).parent == site / "compiler"  # the copy, not the checkout
    return str(wrapper), site / "compiler"


def test_a_new_compiler_of_the_same_version_makes_a_new_analysis_and_parser(
    tmp_path, installed_copy
):
    """An upgrade that keeps the version string (it has been 0.1.0 since the first
    commit) must not serve the old compiler's parser from a warm cache, whether the
    spec is the cached analysis or a reviewed one."""
    interpreter, copy = installed_copy
    folder = tmp_path / "reviewed"
    folder.mkdir()
    shutil.copy(ROOT / "specs" / "qwen3_coder.yaml", folder / "qwen3_coder.yaml")
    coder = template((ROOT / "templates" / "Qwen3-Coder.jinja").read_text(encoding="utf-8"))
    cache = str(tmp_path / "cache")

    def both() -> tuple[auto_start.Resolved, auto_start.Resolved]:
        quiet = {"cache": cache, "python": interpreter, "log": lambda _: None}
        return (
            auto_start.resolve(qwen(), specs=None, **quiet),
            auto_start.resolve(coder, specs=str(folder), **quiet),
        )

    analysed, reviewed = both()
    assert (analysed.how, reviewed.how) == ("analysed", "reviewed")
    assert both() == (analysed._replace(how="cached"), reviewed)  # warm: nothing new
    # The upgrade: one line of the runtime changes, the version does not.
    runtime = copy / "runtime" / "parse.py"
    runtime.write_text(runtime.read_text(encoding="utf-8") + "\n# changed\n", encoding="utf-8")
    upgraded, reviewed_again = both()
    assert upgraded.how == "analysed" and upgraded.spec != analysed.spec
    assert upgraded.module != analysed.module
    assert reviewed_again.how == "reviewed" and reviewed_again.module != reviewed.module


def test_the_fingerprint_is_of_the_compilers_files_not_its_bytecode(installed_copy):
    interpreter, copy = installed_copy
    # Bytecode written where the compiler is installed, as Python does by default.
    writing = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}

    def fingerprint() -> str:
        said = subprocess.run(
            [interpreter, "-c", "from compiler.codegen import auto_lookup\n"
             "print(auto_lookup.fingerprint())"],
            capture_output=True, text=True, cwd=copy.parent.parent, check=True, env=writing,
        )  # fmt: skip
        return said.stdout.strip()

    first = fingerprint()
    assert first == fingerprint()  # the first run wrote __pycache__ folders: no change
    assert any(copy.rglob("*.pyc"))
    schema = copy.parent / "schema" / "format-spec.schema.json"
    schema.write_text(schema.read_text(encoding="utf-8") + "\n", encoding="utf-8")
    second = fingerprint()
    assert second != first
    (copy / "analyze" / "new_module.py").write_text("", encoding="utf-8")
    assert fingerprint() not in (first, second)


def test_relative_paths_in_the_environment_are_the_servers(environment, tmp_path, python):
    """``CHATFMT_PYTHON=./venv/bin/python``, ``CHATFMT_CACHE=cache`` and
    ``CHATFMT_SPECS=reviewed``, relative to the folder the server runs in (the
    compiler runs in a folder of the cache)."""
    interpreter, log = python
    environment.chdir(tmp_path)
    shutil.copy(QWEN_TEMPLATE, tmp_path / "served.jinja")
    environment.setenv("CHATFMT_CHAT_TEMPLATE", "served.jinja")
    environment.setenv("CHATFMT_PYTHON", os.path.join(".", os.path.basename(interpreter)))
    environment.setenv("CHATFMT_CACHE", "cache")
    variable = auto_start.handoff_variable("relative")
    lines: list[str] = []
    try:
        start("relative", lines=lines)
        assert len(lines) == 1 and "analysed the chat template" in lines[0], lines
        assert os.environ[variable].startswith(str(tmp_path / "cache") + os.sep)
        assert runs(log, "analyze") == 1
        del os.environ[variable]
        (tmp_path / "reviewed").mkdir()
        shutil.copy(ROOT / "specs" / f"{QWEN}.yaml", tmp_path / "reviewed" / "mine.yaml")
        environment.setenv("CHATFMT_SPECS", "reviewed")
        lines.clear()
        start("relative", lines=lines)
        assert len(lines) == 1 and "serving the reviewed spec" in lines[0], lines
        assert str(tmp_path / "reviewed" / "mine.yaml") in lines[0]
    finally:
        os.environ.pop(variable, None)


def test_a_reviewed_spec_wins_and_an_edit_to_it_makes_a_new_parser(tmp_path, python):
    interpreter, log = python
    folder = tmp_path / "reviewed"
    folder.mkdir()
    reviewed = folder / "mine.yaml"
    shutil.copy(ROOT / "specs" / f"{QWEN}.yaml", reviewed)
    lines, say = logged()
    found = auto_start.resolve(
        qwen(), specs=str(folder), cache=str(tmp_path / "c"), python=interpreter, log=say
    )
    assert found.how == "reviewed" and found.spec == str(reviewed)
    assert runs(log, "analyze") == 0
    assert len(lines) == 1 and "serving the reviewed spec" in lines[0] and str(reviewed) in lines[0]
    stop = auto_start.load(found.module, "test_auto_reviewed_1", "<test>").STOP

    text = reviewed.read_text(encoding="utf-8").replace(
        "overrides: []",
        "overrides:\n- path: end_of_turn.markers\n  value: ['<|im_end|>', '<|stop here|>']\n"
        "  reason: a test of a reviewed edit",
    )
    assert text != reviewed.read_text(encoding="utf-8")
    reviewed.write_text(text, encoding="utf-8")
    edited = auto_start.resolve(
        qwen(), specs=str(folder), cache=str(tmp_path / "c"), python=interpreter, log=say
    )
    assert edited.module != found.module
    new_stop = auto_start.load(edited.module, "test_auto_reviewed_2", "<test>").STOP
    assert "<|stop here|>" in new_stop and "<|stop here|>" not in stop
    assert runs(log, "analyze") == 0


# --------------------------------------------------------------------------- whole files


def test_a_file_is_replaced_whole_never_rewritten_in_place(tmp_path):
    target = tmp_path / "spec.yaml"
    target.write_text("old spec\n", encoding="utf-8")
    with open(target, encoding="utf-8") as reader:  # a process that opened it before
        auto_start.write_atomically(str(target), "new spec\n")
        assert reader.read() == "old spec\n"  # written in place, it would read the new
    assert target.read_text(encoding="utf-8") == "new spec\n"
    assert sorted(os.listdir(tmp_path)) == ["spec.yaml"]
    assert target.stat().st_mode & 0o777 == auto_start.FILE_MODE


def test_a_failed_write_leaves_the_old_file_and_no_temporary_one(tmp_path, monkeypatch):
    target = tmp_path / "spec.yaml"
    target.write_text("old spec\n", encoding="utf-8")

    def full_disk(source, destination):
        raise OSError("no space left on device")

    monkeypatch.setattr(auto_start.os, "replace", full_disk)
    with pytest.raises(OSError):
        auto_start.write_atomically(str(target), "new spec\n")
    assert target.read_text(encoding="utf-8") == "old spec\n"
    assert sorted(os.listdir(tmp_path)) == ["spec.yaml"]


CONCURRENT = """
import sys
from compiler.codegen import auto_start
template = auto_start.Template(open(sys.argv[1], encoding="utf-8").read(), None, None, "race")
found = auto_start.resolve(template, specs=None, cache=sys.argv[2], python=sys.executable)
print(found.how, found.module)
"""


def test_servers_starting_at_once_share_one_cache_entry(tmp_path):
    """Four servers start on one template with an empty cache: each gets a parser,
    all the same file, complete, with no temporary file left behind."""
    cache = tmp_path / "cache"
    command = [sys.executable, "-c", CONCURRENT, str(QWEN_TEMPLATE), str(cache)]
    started = [
        subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(4)
    ]
    results = [process.communicate(timeout=600) for process in started]
    assert [process.returncode for process in started] == [0] * 4, results
    said = [out.split() for out, _ in results]
    assert {how for how, _ in said} <= {"analysed", "cached"}
    assert len({module for _, module in said}) == 1
    module = said[0][1]
    compile(Path(module).read_text(encoding="utf-8"), module, "exec")
    left = [name for _, _, names in os.walk(cache) for name in names if name.startswith(".tmp")]
    assert left == []


# --------------------------------------------------------------------------- refusals


def test_a_template_the_analysis_fails_on_is_refused_in_one_line(tmp_path, python):
    interpreter, _ = python
    broken = template("{% if messages %}{{ messages[0].content }", "a broken template")
    with pytest.raises(auto_start.Refused) as refused:
        auto_start.resolve(broken, specs=None, cache=str(tmp_path), python=interpreter)
    message = str(refused.value)
    assert "\n" not in message
    assert "the analysis of the chat template of a broken template failed" in message
    assert "error:" in message  # the compiler's own line


def test_no_compiler_is_refused_saying_how_to_install_it(tmp_path):
    with pytest.raises(auto_start.Refused, match="cannot run .*install the compiler"):
        auto_start.resolve(qwen(), specs=None, cache=str(tmp_path), python=str(tmp_path / "no"))
    impostor = tmp_path / "python"
    impostor.write_text("#!/bin/sh\necho 'compiler 9.9'\n", encoding="utf-8")
    impostor.chmod(0o755)
    with pytest.raises(auto_start.Refused, match="is not chatfmt's compiler"):
        auto_start.resolve(qwen(), specs=None, cache=str(tmp_path), python=str(impostor))


@pytest.fixture
def environment(monkeypatch, tmp_path):
    """A clean start-up environment: no handed-on parser, the cache in tmp_path."""
    for name in list(os.environ):
        if name.startswith("CHATFMT_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("CHATFMT_CACHE", str(tmp_path / "cache"))
    return monkeypatch


def start(name: str, server: str = "vllm", lines: list | None = None) -> auto_start.Started:
    return auto_start.start(
        server,
        name,
        specs=None,
        cache=None,
        module_name=f"test_auto_{name}_format",
        label="<test>",
        log=(lines.append if lines is not None else lambda _: None),
    )


def test_a_template_that_writes_neither_calls_nor_reasoning_is_refused(environment, tmp_path):
    plain = tmp_path / "plain.jinja"
    plain.write_text(PLAIN, encoding="utf-8")
    environment.setenv("CHATFMT_CHAT_TEMPLATE", str(plain))
    with pytest.raises(SystemExit) as refused:
        start("plain")
    message = str(refused.value.code)
    assert "\n" not in message
    assert message.startswith("chatfmt: refusing to start the 'plain' parsers: ")
    assert "neither tool calls nor reasoning" in message
    assert auto_start.handoff_variable("plain") not in os.environ
    # The analysis itself offers calls in the compiler's fallback format, which the
    # server never asks the model for: they do not count.
    spec = next((tmp_path / "cache").glob("*/spec.yaml"))
    assert yaml.safe_load(spec.read_text(encoding="utf-8"))["polyfills"]["fallback_call"]


def test_without_a_template_to_read_the_start_is_refused(environment):
    with pytest.raises(SystemExit, match="no vLLM arguments on the stack"):
        start("nothing")
    environment.setattr(sys, "argv", ["plugin.py", "serve", "--port", "30000"])
    with pytest.raises(SystemExit, match="no --model-path on the command line"):
        start("nothing", "sglang")


def test_the_parser_found_is_handed_to_the_servers_child_processes(environment):
    environment.setenv("CHATFMT_CHAT_TEMPLATE", str(QWEN_TEMPLATE))
    lines: list[str] = []
    parent = start("handed", lines=lines)
    assert len(lines) == 1 and "analysed" in lines[0]
    variable = auto_start.handoff_variable("handed")
    assert os.path.isfile(os.environ[variable])
    assert sys.modules["test_auto_handed_format"].SOURCE == parent.source
    # A child: the same environment but no template to read and no compiler to run;
    # it loads the parser its parent found, and says nothing.
    environment.delenv("CHATFMT_CHAT_TEMPLATE")
    environment.setenv("CHATFMT_PYTHON", "/no/such/python")
    child = subprocess.run(
        [sys.executable, "-c", "from tests.test_auto_plugin import start\n"
         "print(start('handed').reasoning_end)"],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )
    assert child.returncode == 0, child.stderr
    assert (child.stdout.strip(), child.stderr) == ("</think>", "")


# --------------------------------------------------------------------------- SGLang's argv


@pytest.mark.parametrize(
    "argv, model",
    [
        (["p.py", "serve", "--model-path", "m", "--port", "1"], "m"),
        (["p.py", "serve", "m", "--tool-call-parser=chatfmt"], "m"),
        (["p.py", "serve", "--tp", "2", "--model-path=m"], "m"),
        (["p.py", "serve", "--model-path-extra", "x"], None),
    ],
)
def test_sglang_arguments_are_read_as_sglang_reads_them(argv, model):
    assert auto_start._sglang_arguments(argv).model_path == model


def test_a_parser_flag_is_taken_out_in_either_spelling():
    argv = ["p", "serve", "--tool-call-parser", "chatfmt", "--reasoning-parser=chatfmt"]
    assert auto_start.drop_flag(argv, "--reasoning-parser", "chatfmt")
    assert auto_start.drop_flag(argv, "--tool-call-parser", "chatfmt")
    assert argv == ["p", "serve"]
    other = ["p", "--tool-call-parser", "qwen25"]
    assert not auto_start.drop_flag(other, "--tool-call-parser", "chatfmt")
    assert other == ["p", "--tool-call-parser", "qwen25"]


# --------------------------------------------------------------------------- the plugins


def _assigned(text: str) -> dict[str, ast.expr]:
    found = {}
    for node in ast.parse(text).body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            found[node.targets[0].id] = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            assert node.value is not None
            found[node.target.id] = node.value
    return found


FILLED = {"vllm": ("REASONING_STARTS", "REASONING_END", "MODULE_SOURCE"),
          "sglang": ("REASONING_START", "REASONING_END", "HAS_CALLS", "MODULE_SOURCE")}


# Formats that differ in what the plugins fill in: reasoning and calls; two openers of
# the reasoning block; calls only; reasoning only (calls in the fallback format).
FILL_SLUGS = [QWEN, "google_gemma_4_31b_it", "qwen3_coder", "huggingfacetb_smollm3_3b"]


def test_the_formats_filled_in_differ_as_said():
    modules = [rt.module(slug) for slug in FILL_SLUGS]
    assert [len(vars(m).get("REASONING_STARTS", ())) for m in modules] == [1, 2, 0, 1]
    assert [m.SPEC["tools"]["format"] != "none" for m in modules] == [True, True, True, False]


@pytest.mark.parametrize("slug", FILL_SLUGS)
def test_an_auto_plugin_fills_in_what_the_per_model_plugin_does(slug, tmp_path):
    path = ROOT / "specs" / f"{slug}.yaml"
    fmt = model.build(specs.resolve(specs.load(path), str(path))[0], slug=slug, origin=str(path))
    source = standalone(fmt)
    module_file = tmp_path / "module.py"
    module_file.write_text(source, encoding="utf-8")
    module = auto_start.load(str(module_file), f"test_auto_fill_{slug}", "<test>")
    found = auto_start.started(module, str(path))
    for server, emitter in (("vllm", plugin_vllm), ("sglang", plugin_sglang)):
        per_model = _assigned(emitter.text(fmt, source, slug))
        auto = _assigned(emitter.auto_text(slug))
        for name in FILLED[server]:
            want = ast.literal_eval(per_model[name])
            got = eval(compile(ast.Expression(auto[name]), "<auto>", "eval"), {"_STARTED": found})
            assert got == want, (server, name)


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("server", ["vllm", "sglang"])
def test_plugin_auto_writes_one_file_for_every_model(capsys, tmp_path, server):
    out = tmp_path / "auto.py"
    code, _, err = run(
        capsys, "plugin", server, "--auto", "-o", str(out), "--specs", "specs", "--cache", "c"
    )
    assert code == 0, err
    assert f"{server} plugin 'chatfmt' for every model" in err
    text = out.read_text(encoding="utf-8")
    values = _assigned(text)
    assert ast.literal_eval(values["NAME"]) == "chatfmt"
    assert ast.literal_eval(values["SPECS_DIR"]) == str(ROOT / "specs")
    assert ast.literal_eval(values["CACHE_DIR"]) == os.path.abspath("c")
    start_source = ast.literal_eval(values["START_SOURCE"])
    assert start_source == Path(auto_start.__file__).read_text(encoding="utf-8")
    assert "# filled in" not in text
    # The start-up imports the standard library at its top, a server only in a function.
    top = set()
    for node in ast.parse(start_source).body:
        if isinstance(node, ast.Import):
            top |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            top.add((node.module or "").split(".")[0])
    assert top <= set(sys.stdlib_module_names)


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["plugin", "vllm", "specs/qwen_qwen3_0_6b.yaml", "--auto"], "a spec or --auto, not both"),
        (["plugin", "vllm"], "give a spec (SPEC_FILE), or --auto"),
        (["plugin", "vllm", "specs/qwen_qwen3_0_6b.yaml", "--specs", "specs"], "are for --auto"),
        (["plugin", "sglang", "--auto", "--specs", "no/such/folder"], "is no folder"),
        (["plugin", "sglang", "--auto", "--name", "a b"], "plugin name 'a b'"),
    ],
)
def test_plugin_auto_usage_errors_are_one_line(capsys, tmp_path, argv, fragment):
    code, _, err = run(capsys, *argv, "-o", str(tmp_path / "p.py"))
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0], err
    assert not (tmp_path / "p.py").exists()
