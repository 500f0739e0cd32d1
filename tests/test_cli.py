"""The review workflow on the command line: hand patches that survive a rebuild, drift
checks, and the analyze / parse / explain commands, with their exit codes."""

from __future__ import annotations

import ast
import contextlib
import hashlib
import io
import json
import os
import shlex
import shutil
import subprocess
import sys
import tomllib

import pytest
import yaml

from compiler import samples
from compiler import spec as specs
from compiler.__main__ import main
from compiler.analyze.evidence import Evidence, Render
from compiler.build import outputs
from compiler.explain import explain
from compiler.loader import load_generated
from compiler.render import ChatTemplate
from compiler.sources import discover

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "templates")

QWEN = "Qwen-Qwen3-0.6B.jinja"
NEMOTRON = "NVIDIA-Nemotron-Nano-v2.jinja"
# Reasoning in [THINK]…[/THINK] and a turn that ends with the tokenizer's eos token, so
# analyzing it with and without real bos/eos strings gives different specs.
MINISTRAL = "mistralai-Ministral-3-14B-Reasoning-2512.jinja"

QWEN_SPEC = "specs/qwen_qwen3_0_6b.yaml"
QWEN_SPEC_IN_REPO = os.path.join(ROOT, QWEN_SPEC)
QWEN_PARSER = "generated/qwen_qwen3_0_6b.py"
NEMOTRON_SPEC = "specs/nvidia_nemotron_nano_v2.yaml"


def corpus_text(name: str) -> str:
    path = os.path.join(CORPUS, name)
    if not os.path.isfile(path):
        pytest.skip("no corpus: run make templates")
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def write(path, text: str | bytes) -> str:
    os.makedirs(os.path.dirname(str(path)) or ".", exist_ok=True)
    data = text if isinstance(text, bytes) else text.encode("utf-8")
    with open(path, "wb") as handle:
        handle.write(data)
    return str(path)


def read(path) -> str:
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(err: str, *fragments: str) -> None:
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error: ")
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])


BUILD = ("build", "--templates", "templates", "--specs", "specs", "--generated", "generated")
CHECK = ("check", "--templates", "templates", "--specs", "specs", "--generated", "generated")


# --------------------------------------------------------------------------- a built tree


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """Two corpus templates built once: (tree, exit code, stdout, stderr)."""
    tree = tmp_path_factory.mktemp("built")
    for name in (QWEN, NEMOTRON):
        write(tree / "templates" / name, corpus_text(name))
    cwd = os.getcwd()
    os.chdir(tree)  # relative paths, so a copy of the tree is as good as the original
    try:
        out, err = _captured(lambda: main(list(BUILD)))
    finally:
        os.chdir(cwd)
    return tree, *out, err


def _captured(call):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = call()
    return (code, out.getvalue()), err.getvalue()


@pytest.fixture
def tree(built, tmp_path, monkeypatch):
    """A fresh copy of the built tree, as the working directory."""
    copy = tmp_path / "tree"
    shutil.copytree(built[0], copy)
    monkeypatch.chdir(copy)
    return copy


def add_override(spec_path: str, entry_yaml: str) -> None:
    """Add an override the way a reviewer does: by editing the text of the file."""
    text = read(spec_path)
    assert text.endswith("overrides: []\n")
    write(spec_path, text[: -len("[]\n")] + "\n" + entry_yaml)


def load_module(path: str):
    return load_generated(os.path.dirname(path) or ".", os.path.basename(path)[: -len(".py")])


# --------------------------------------------------------------------------- build


def test_build_prints_progress_and_a_summary(built):
    _, code, out, err = built
    assert code == 0
    assert err.splitlines() == ["[1/2] nvidia_nemotron_nano_v2", "[2/2] qwen_qwen3_0_6b"]
    # two specs; two modules, two grammars, two tool-call grammars, two response
    # templates, the package's __init__.py and its runtime
    assert out == "2 templates: 2 specs and 10 generated files changed, 0 warnings\n"


def test_rebuild_changes_nothing(tree, capsys):
    code, out, _ = run(capsys, *BUILD)
    assert (code, out) == (0, "2 templates: 0 specs and 0 generated files changed, 0 warnings\n")


def test_every_spec_says_edits_outside_overrides_are_overwritten(tree):
    head = read(QWEN_SPEC).split("spec_version:")[0]
    assert "overrides" in head and "overwritten" in head
    assert all(line.startswith("#") for line in head.splitlines())


SELF_OPENING = """\
- path: reasoning.opened_by_prompt.thinking_on
  value: true
  reason: pretend the prompt leaves the model inside <think>
"""


def test_override_survives_rebuilds_and_reaches_the_parser(tree, capsys):
    text = "6 * 7 = 42\n</think>\n\nIt is 42.<|im_end|>"
    before = load_module(QWEN_PARSER).parse(text, enable_thinking=True)
    assert before["reasoning_content"] is None  # the analysis: nothing opens the block

    add_override(QWEN_SPEC, SELF_OPENING)
    for _ in range(2):
        code, out, _ = run(capsys, *BUILD)
        assert code == 0
        spec = specs.load(QWEN_SPEC)
        assert spec["overrides"] == yaml.safe_load(SELF_OPENING)
        assert spec["reasoning"]["opened_by_prompt"] == {"thinking_on": True, "thinking_off": False}
    assert out.startswith("2 templates: 0 specs and 0 generated files changed")

    parser = load_module(QWEN_PARSER)
    assert parser.parse(text, enable_thinking=True) == {
        "role": "assistant",
        "content": "It is 42.",
        "reasoning_content": "6 * 7 = 42",
        "tool_calls": [],
    }
    # Only the thinking-on setting was patched.
    assert parser.parse(text, enable_thinking=False)["reasoning_content"] is None


def test_edits_outside_overrides_are_overwritten(tree, capsys):
    original = read(QWEN_SPEC)
    write(QWEN_SPEC, original.replace("end: </think>", "end: </thought>"))
    code, out, _ = run(capsys, *BUILD)
    assert code == 0 and out.startswith("2 templates: 1 specs and 0 generated files changed")
    assert read(QWEN_SPEC) == original


def test_an_override_the_analysis_agrees_with_can_be_dropped(tree, capsys):
    add_override(QWEN_SPEC, "- path: reasoning.mode\n  value: tag\n  reason: r\n")
    code, out, err = run(capsys, *BUILD)
    assert code == 0
    assert (
        f"warning: {QWEN_SPEC}: override reasoning.mode agrees with the analysis "
        "and can be dropped"
    ) in err.splitlines()
    assert out.endswith(", 1 warnings\n")


@pytest.mark.parametrize(
    "entry, fragments",
    [
        (  # the schema has no such key
            "- path: reasoning.opend_by_prompt\n  value: true\n  reason: typo\n",
            ["reasoning.opend_by_prompt", "unknown key", "set by override"],
        ),
        (  # the schema allows the key but not the value
            "- path: reasoning.mode\n  value: sometimes\n  reason: r\n",
            ["reasoning.mode", "'sometimes' is not one of"],
        ),
        ("- path: reasoning.mode\n  value: tag\n", ["overrides.0.reason", "required"]),
        ("- reasoning.mode\n", ["overrides.0", "object"]),
        ("- path: reasoning..mode\n  value: tag\n  reason: r\n", ["overrides.0.path"]),
    ],
)
def test_a_bad_override_stops_the_build_naming_file_and_path(tree, capsys, entry, fragments):
    add_override(QWEN_SPEC, entry)
    reviewed = read(QWEN_SPEC)
    code, _, err = run(capsys, *BUILD)
    assert code == 2
    assert "Traceback" not in err
    assert_one_line_error(err.strip().splitlines()[-1], QWEN_SPEC, *fragments)
    assert read(QWEN_SPEC) == reviewed  # the reviewer's file is left as it was

    # parse refuses it with the same line (it used to parse as if it were not there).
    code, out, parse_err = run(capsys, "parse", QWEN_SPEC)
    assert (code, out) == (2, "")
    assert parse_err == err.strip().splitlines()[-1] + "\n"


# --------------------------------------------------------------------------- check


def test_check_passes_on_a_fresh_build(tree, capsys):
    code, out, err = run(capsys, *CHECK)
    assert code == 0
    assert "up to date" in out and err == ""


def test_check_names_a_changed_template(tree, capsys):
    path = "templates/" + QWEN
    write(path, read(path) + "{# a comment #}")
    code, out, _ = run(capsys, *CHECK)
    assert code == 1
    [problem] = out.splitlines()[:-1]
    assert problem.startswith(f"{QWEN_SPEC}: templates/{QWEN} changed since this spec was made")


def test_check_names_a_spec_whose_template_is_missing(tree, capsys):
    os.remove("templates/" + NEMOTRON)
    code, out, _ = run(capsys, *CHECK)
    assert code == 1
    assert f"{NEMOTRON_SPEC}: its template templates/{NEMOTRON} is missing" in out.splitlines()


def test_check_names_a_template_without_a_spec(tree, capsys):
    os.remove(QWEN_SPEC)
    code, out, _ = run(capsys, *CHECK)
    assert code == 1
    assert out.startswith(f"{QWEN_SPEC}: missing: templates/{QWEN} has no spec")


def test_check_names_each_drifted_generated_file(tree, capsys):
    write(QWEN_PARSER, read(QWEN_PARSER) + "# edited\n")
    os.remove("generated/nvidia_nemotron_nano_v2.gbnf")
    write("generated/qwen_qwen3_0_6b.tools.gbnf", "root ::= x\n")
    write("generated/retired_model.py", "")
    code, out, _ = run(capsys, *CHECK)
    assert code == 1
    assert sorted(out.splitlines()[:-1]) == [
        f"generated/nvidia_nemotron_nano_v2.gbnf: missing: {NEMOTRON_SPEC} produces it",
        f"{QWEN_PARSER}: differs from what {QWEN_SPEC} produces",
        f"generated/qwen_qwen3_0_6b.tools.gbnf: differs from what {QWEN_SPEC} produces",
        "generated/retired_model.py: no spec produces it",
    ]
    assert out.splitlines()[-1].startswith("4 problems")


def test_check_finds_drift_in_the_runtime(tree, capsys):
    write("generated/_runtime.py", read("generated/_runtime.py") + "# edited\n")
    code, out, _ = run(capsys, *CHECK)
    assert code == 1
    assert out.splitlines()[:-1] == ["generated/_runtime.py: missing or not what the build writes"]
    os.remove("generated/_runtime.py")
    code, out, _ = run(capsys, *CHECK)
    assert code == 1
    assert out.splitlines()[:-1] == ["generated/_runtime.py: missing or not what the build writes"]


def test_check_names_each_drifted_response_template(tree, capsys):
    """transformers' response_template is generated as the parsers are: one edited,
    one removed and one no spec accounts for are each named."""
    qwen = "generated/qwen_qwen3_0_6b.response_template.json"
    nemotron = "generated/nvidia_nemotron_nano_v2.response_template.json"
    assert '"assistant"' in read(qwen) and os.path.exists(nemotron)
    write(qwen, read(qwen).replace('"assistant"', '"user"'))
    os.remove(nemotron)
    write("generated/retired_model.response_template.json", "{}\n")
    code, out, _ = run(capsys, *CHECK)
    assert code == 1
    assert sorted(out.splitlines()[:-1]) == [
        f"{nemotron}: missing: {NEMOTRON_SPEC} produces it",
        f"{qwen}: differs from what {QWEN_SPEC} produces",
        "generated/retired_model.response_template.json: no spec produces it",
    ]
    assert run(capsys, *BUILD)[0] == 0
    os.remove("generated/retired_model.response_template.json")
    assert run(capsys, *CHECK)[0] == 0


def test_check_names_a_tool_grammar_no_spec_produces(tree, capsys):
    """A reviewer's override takes the tool calls out: the rebuild removes the tool-call
    grammar, and one left behind is named."""
    add_override(
        QWEN_SPEC,
        "- path: tools\n  value: {format: none}\n  reason: r\n"
        "- path: grammar.triggers\n  value: []\n  reason: r\n",
    )
    tools_grammar = "generated/qwen_qwen3_0_6b.tools.gbnf"
    assert run(capsys, *BUILD)[0] == 0 and not os.path.exists(tools_grammar)
    write(tools_grammar, "root ::= x\n")
    code, out, _ = run(capsys, *CHECK)
    assert code == 1
    assert out.splitlines()[:-1] == [
        f"{tools_grammar}: should not exist: {QWEN_SPEC} produces no such file"
    ]


def test_check_names_changed_render_inputs(tree, capsys):
    text = read("templates/" + QWEN)
    manifest = {
        "corpus": {"package": "p", "version": "0", "sha256": "0" * 64, "member_dir": "t"},
        "templates": {
            QWEN: {
                "sha256": hashlib.sha256(text.encode()).hexdigest(),
                "inputs": {"eos_token": "<|endoftext|>"},
            }
        },
    }
    write("templates/manifest.json", json.dumps(manifest))
    code, out, _ = run(capsys, *CHECK)
    assert code == 1
    assert out.splitlines()[:-1] == [
        f"{QWEN_SPEC}: render inputs of templates/{QWEN} changed since this spec was made "
        "(eos_token)"
    ]


def test_check_names_a_spec_the_schema_rejects(tree, capsys):
    write(QWEN_SPEC, read(QWEN_SPEC).replace("mode: tag", "mode: sometimes", 1))
    code, out, _ = run(capsys, *CHECK)
    assert code == 1
    assert out.startswith(f"{QWEN_SPEC}: reasoning.mode: 'sometimes' is not one of")


def test_check_names_an_override_not_yet_built(tree, capsys):
    add_override(QWEN_SPEC, SELF_OPENING)
    code, out, _ = run(capsys, *CHECK)
    assert code == 1
    assert out.startswith(f"{QWEN_SPEC}: its overrides are not applied")
    run(capsys, *BUILD)
    assert run(capsys, *CHECK)[0] == 0


def test_check_only_warns_about_another_compiler_version(tree, capsys):
    # What an older compiler left behind: a spec with its version, and the files it made
    # from that spec.
    spec = specs.load(QWEN_SPEC)
    spec["compiler_version"] = "0.0.1"
    write(QWEN_SPEC, specs.dump(spec))
    for name, text in outputs("qwen_qwen3_0_6b", spec).items():
        if text is not None:
            write(os.path.join("generated", name), text)
    code, out, err = run(capsys, *CHECK)
    assert code == 0, out
    [warning] = err.splitlines()
    assert warning.startswith(f"warning: {QWEN_SPEC}: made by compiler 0.0.1, this is ")


def test_check_renders_nothing(tree, capsys, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("check rendered a template")

    monkeypatch.setattr(ChatTemplate, "render", refuse)
    monkeypatch.setattr(ChatTemplate, "__init__", refuse)
    assert run(capsys, *CHECK)[0] == 0
    path = "templates/" + NEMOTRON
    write(path, read(path) + "\n")
    code, out, _ = run(capsys, *CHECK)
    assert code == 1 and out.startswith(NEMOTRON_SPEC)


def test_check_takes_extra_sources(tree, capsys):
    model = tree / "models" / "Tiny"
    write(model / "chat_template.jinja", corpus_text(QWEN))
    code, out, _ = run(capsys, *CHECK, "--source", str(model))
    assert code == 1
    assert out.startswith(f"specs/tiny.yaml: missing: {model} has no spec")


# --------------------------------------------------------------------------- analyze


def analyzed(capsys, *argv: str) -> dict:
    code, out, err = run(capsys, "analyze", *argv)
    assert code == 0, err
    spec = yaml.safe_load(out)
    specs.validate(spec, "stdout")
    assert spec["overrides"] == []
    return spec


def format_of(spec: dict) -> dict:
    return {key: spec[key] for key in ("reasoning", "content", "tools", "end_of_turn")}


@pytest.fixture
def reference(tmp_path, capsys):
    """The Ministral template analyzed as a .jinja file with bos/eos from a manifest."""
    text = corpus_text(MINISTRAL)
    directory = tmp_path / "ref"
    path = write(directory / MINISTRAL, text)
    manifest = {
        "corpus": {"package": "p", "version": "0", "sha256": "0" * 64, "member_dir": "t"},
        "templates": {
            MINISTRAL: {
                "sha256": hashlib.sha256(text.encode()).hexdigest(),
                "inputs": {"bos_token": "<s>", "eos_token": "</s>"},
            }
        },
    }
    write(directory / "manifest.json", json.dumps(manifest))
    spec = analyzed(capsys, path)
    assert spec["render_inputs"]["eos_token"] == "</s>"
    # The real eos string is a marker the parser can strip; the placeholder never is.
    without = analyzed(capsys, write(tmp_path / "plain" / MINISTRAL, text))
    assert format_of(without) != format_of(spec)
    return spec


def test_analyze_writes_the_spec_to_a_file_and_says_how_it_was_made(tmp_path, capsys):
    out = tmp_path / "qwen.yaml"
    source = os.path.join(CORPUS, QWEN)
    corpus_text(QWEN)
    code, stdout, err = run(capsys, "analyze", source, "-o", str(out))
    assert (code, stdout) == (0, "")
    assert err.strip().endswith(f"wrote {out}: the spec of {source}")
    text = read(out)
    assert text.startswith("# Made by `chatfmt analyze` from the template named below")
    assert "no\n# overrides" in text
    assert specs.load(str(out))["overrides"] == []
    # The build's own specs say that they are the build's.
    assert read(QWEN_SPEC_IN_REPO).startswith("# Made by `chatfmt build`")


def test_analyze_a_model_directory_with_chat_template_jinja(tmp_path, capsys, reference):
    model = tmp_path / "Ministral-Reasoning"
    write(model / "chat_template.jinja", corpus_text(MINISTRAL))
    write(model / "tokenizer_config.json", json.dumps({"bos_token": "<s>", "eos_token": "</s>"}))
    spec = analyzed(capsys, str(model))
    assert format_of(spec) == format_of(reference)
    assert spec["template"]["path"] == str(model)


def test_analyze_a_tokenizer_config_with_a_template_string(tmp_path, capsys, reference):
    model = tmp_path / "m"
    config = {
        "chat_template": corpus_text(MINISTRAL),
        "bos_token": {"content": "<s>"},
        "eos_token": {"content": "</s>"},
    }
    write(model / "tokenizer_config.json", json.dumps(config))
    assert format_of(analyzed(capsys, str(model))) == format_of(reference)


def test_analyze_a_named_template_of_a_tokenizer_config(tmp_path, capsys, reference):
    model = tmp_path / "m"
    config: dict = {
        "chat_template": [
            {"name": "default", "template": corpus_text(QWEN)},
            {"name": "reasoning", "template": corpus_text(MINISTRAL)},
        ],
        "bos_token": "<s>",
        "eos_token": "</s>",
    }
    write(model / "tokenizer_config.json", json.dumps(config))
    spec = analyzed(capsys, str(model), "--name", "reasoning")
    assert format_of(spec) == format_of(reference)
    assert spec["template"]["path"] == f"{model}#reasoning"
    default = analyzed(capsys, str(model), "--name", "default")
    assert default["reasoning"]["start"] == "<think>"
    # Without --name, the model's own template: the one the build compiles under the
    # model's slug, and the one Hugging Face applies.
    assert analyzed(capsys, str(model)) == default

    code, _, err = run(capsys, "analyze", str(model), "--name", "tool_use")
    assert code == 2
    assert_one_line_error(err, "'tool_use'", "default, reasoning")
    config["chat_template"] = config["chat_template"][1:] + [{"name": "r2", "template": "x"}]
    write(model / "tokenizer_config.json", json.dumps(config))
    code, _, err = run(capsys, "analyze", str(model))
    assert code == 2
    assert_one_line_error(err, str(model), "name one of: r2, reasoning")


def test_analyze_a_gguf_file(tmp_path, capsys, reference):
    gguf = pytest.importorskip("gguf")
    path = str(tmp_path / "Ministral.Q4_K_M.gguf")
    writer = gguf.GGUFWriter(path, "llama")
    writer.add_token_list(["<unk>", "<s>", "</s>", "[THINK]", "[/THINK]"])
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_chat_template(corpus_text(MINISTRAL))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    spec = analyzed(capsys, path)
    assert format_of(spec) == format_of(reference)
    assert spec["render_inputs"]["bos_token"] == "<s>"


def test_analyze_a_corpus_template_takes_its_manifest_inputs(tmp_path, capsys):
    name = "CohereForAI-c4ai-command-r-plus-tool_use.jinja"
    text = corpus_text(name)
    spec = analyzed(capsys, os.path.join(CORPUS, name))
    assert spec["render_inputs"]["tool_shape"] == "cohere"  # as templates/manifest.json says
    elsewhere = analyzed(capsys, write(tmp_path / name, text))
    assert elsewhere["render_inputs"]["tool_shape"] == "openai"


# --------------------------------------------------------------------------- parse


def test_parse_prints_the_message_as_json(tree, capsys, monkeypatch):
    output = "<think>\nhm\n</think>\n\nHi «there»<|im_end|>"
    monkeypatch.setattr(sys, "stdin", io.StringIO(output))
    code, out, _ = run(capsys, "parse", QWEN_SPEC)
    assert code == 0
    assert json.loads(out) == {
        "role": "assistant",
        "content": "Hi «there»",
        "reasoning_content": "hm",
        "tool_calls": [],
    }


def test_parse_follows_the_thinking_setting(tree, capsys, monkeypatch):
    # Nemotron's prompt leaves <think> open, so plain text is reasoning, unless the
    # reviewed spec says that thinking off closes it.
    for argv, expected in (
        ((), {"content": None, "reasoning_content": "The answer is 42."}),
        (("--no-thinking",), {"content": None, "reasoning_content": "The answer is 42."}),
    ):
        monkeypatch.setattr(sys, "stdin", io.StringIO("The answer is 42.\n<SPECIAL_12>\n"))
        code, out, _ = run(capsys, "parse", NEMOTRON_SPEC, *argv)
        message = json.loads(out)
        assert code == 0
        assert {key: message[key] for key in expected} == expected

    add_override(
        NEMOTRON_SPEC,
        "- path: reasoning.opened_by_prompt.thinking_off\n  value: false\n  reason: r\n",
    )
    run(capsys, *BUILD)
    monkeypatch.setattr(sys, "stdin", io.StringIO("The answer is 42.\n<SPECIAL_12>\n"))
    code, out, _ = run(capsys, "parse", NEMOTRON_SPEC, "--no-thinking")
    assert json.loads(out)["content"] == "The answer is 42."


def test_parse_reads_a_tools_file(tree, capsys, monkeypatch):
    tools = tree / "tools.json"
    write(tools, json.dumps([samples.TOOL]))
    monkeypatch.setattr(sys, "stdin", io.StringIO("Hi"))
    code, out, _ = run(capsys, "parse", QWEN_SPEC, "--tools", str(tools))
    assert code == 0 and json.loads(out)["content"] == "Hi"


@pytest.mark.parametrize(
    "content, fragment",
    [("{not json", "is not valid JSON"), ('{"type": "function"}', "expected a JSON list")],
)
def test_parse_rejects_a_bad_tools_file(tree, capsys, content, fragment):
    tools = write(tree / "tools.json", content)
    code, _, err = run(capsys, "parse", QWEN_SPEC, "--tools", tools)
    assert code == 2
    assert_one_line_error(err, tools, fragment)


def test_parse_strict_exits_1_on_output_that_does_not_fit(tree, capsys, monkeypatch):
    spec = specs.load(QWEN_SPEC)
    spec["content"] = {"mode": "always_wrapped", "start": "<answer>", "end": "</answer>"}
    wrapped = write("wrapped.yaml", specs.dump(spec))
    monkeypatch.setattr(sys, "stdin", io.StringIO("<answer>Hi</answer> and more"))
    assert run(capsys, "parse", wrapped)[0] == 0  # not strict: kept as content
    monkeypatch.setattr(sys, "stdin", io.StringIO("<answer>Hi</answer> and more"))
    code, out, err = run(capsys, "parse", wrapped, "--strict")
    assert (code, out) == (1, "")
    assert "Traceback" not in err and wrapped in err and "</answer>" in err


def test_parse_through_the_real_command_line(tree):
    result = subprocess.run(
        [sys.executable, "-m", "compiler", "parse", QWEN_SPEC],
        input="<think>\nhm\n</think>\n\nHi<|im_end|>",
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": ROOT},
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["reasoning_content"] == "hm"


def parsed(capsys, monkeypatch, text: str, *argv: str) -> tuple[dict, str]:
    monkeypatch.setattr(sys, "stdin", io.StringIO(text))
    code, out, err = run(capsys, "parse", *argv)
    assert code == 0, err
    return json.loads(out), err


# Appended to a built module: shows that parse ran this very module.
MARK = """

def parse(text, **options):  # appended by the test
    return {"role": "the built module", "content": text}
"""


@pytest.fixture
def no_generating(monkeypatch):
    """Fails the test if parse generates a module; calls() says whether it tried."""
    from compiler.codegen import module as module_codegen

    calls = []

    def refuse(fmt):
        calls.append(fmt)
        raise AssertionError("parse generated the module")

    monkeypatch.setattr(module_codegen, "load", refuse)
    return calls


def test_parse_runs_the_built_module_without_generating(tree, capsys, monkeypatch, no_generating):
    message, err = parsed(capsys, monkeypatch, "<think>\nhm\n</think>\n\nHi<|im_end|>", QWEN_SPEC)
    assert message["reasoning_content"] == "hm" and err == ""
    write(QWEN_PARSER, read(QWEN_PARSER) + MARK)
    message, _ = parsed(capsys, monkeypatch, "Hi", QWEN_SPEC)
    assert message == {"role": "the built module", "content": "Hi"}
    # --generated names the directory; by default it is 'generated' beside specs/.
    shutil.copytree("generated", "elsewhere")
    os.remove(QWEN_PARSER)
    message, _ = parsed(capsys, monkeypatch, "Hi", QWEN_SPEC, "--generated", "elsewhere")
    assert message["role"] == "the built module"
    assert not no_generating


def spy_on_generate(monkeypatch) -> list:
    from compiler.codegen import module as module_codegen

    calls: list = []
    real = module_codegen.load

    def spy(fmt):
        calls.append(fmt)
        return real(fmt)

    monkeypatch.setattr(module_codegen, "load", spy)
    return calls


def test_parse_of_an_edited_spec_compiles_the_spec_not_the_built_module(
    tree, capsys, monkeypatch
):
    write(QWEN_PARSER, read(QWEN_PARSER) + MARK)
    generated = spy_on_generate(monkeypatch)
    write(QWEN_SPEC, read(QWEN_SPEC).replace("end: </think>", "end: </thought>"))
    text = "<think>\nhm\n</thought>\n\nHi<|im_end|>"
    message, err = parsed(capsys, monkeypatch, text, QWEN_SPEC)
    assert (message["reasoning_content"], message["content"], err) == ("hm", "Hi", "")
    assert len(generated) == 1


def test_parse_applies_an_override_not_yet_built_and_says_so(tree, capsys, monkeypatch):
    write(QWEN_PARSER, read(QWEN_PARSER) + MARK)
    add_override(QWEN_SPEC, SELF_OPENING)
    text = "6 * 7 = 42\n</think>\n\nIt is 42.<|im_end|>"
    message, err = parsed(capsys, monkeypatch, text, QWEN_SPEC)
    assert (message["reasoning_content"], message["content"]) == ("6 * 7 = 42", "It is 42.")
    assert err == (
        f"warning: {QWEN_SPEC}: its overrides are not built into the spec yet; "
        "parsing with them applied (a build writes them)\n"
    )
    # Built, the same parser comes from generated/ and the warning is gone.
    run(capsys, *BUILD)
    monkeypatch.setattr(sys, "stdin", io.StringIO(text))
    assert run(capsys, "parse", QWEN_SPEC)[1:] == (json.dumps(message, indent=2) + "\n", "")


def test_parse_compiles_the_spec_when_the_built_module_will_not_do(tree, capsys, monkeypatch):
    generated = spy_on_generate(monkeypatch)
    text = "<think>\nhm\n</think>\n\nHi<|im_end|>"
    # Made by another compiler version (the module records the spec it was made from).
    spec = specs.load(QWEN_SPEC)
    spec["compiler_version"] = "0.0.1"
    write(QWEN_SPEC, specs.dump(spec))
    module = outputs("qwen_qwen3_0_6b", spec)["qwen_qwen3_0_6b.py"]
    assert module is not None
    write(QWEN_PARSER, module + MARK)
    generated.clear()
    assert parsed(capsys, monkeypatch, text, QWEN_SPEC)[0]["reasoning_content"] == "hm"
    assert len(generated) == 1
    # A module that does not load, or none at all.
    run(capsys, *BUILD)
    write(QWEN_PARSER, read(QWEN_PARSER) + "\n)\n")
    generated.clear()
    assert parsed(capsys, monkeypatch, text, QWEN_SPEC)[0]["reasoning_content"] == "hm"
    os.mkdir("empty")
    for argv in ((QWEN_SPEC, "--generated", "empty"), (shutil.copy(QWEN_SPEC, "."),)):
        assert parsed(capsys, monkeypatch, text, *argv)[0]["reasoning_content"] == "hm"
    assert len(generated) == 3


def test_parse_refuses_a_generated_folder_that_does_not_exist(tree, capsys, monkeypatch):
    """A mistyped --generated is the caller's mistake: said, not compiled around."""
    monkeypatch.setattr(sys, "stdin", io.StringIO("Hi<|im_end|>"))
    code, out, err = run(capsys, "parse", QWEN_SPEC, "--generated", "nowhere")
    assert (code, out, err) == (2, "", "error: --generated nowhere: no such directory\n")


def test_parse_of_a_committed_spec_imports_no_generator():
    """The acceptance figure was a parse in under a second (it took 0.6 s generating,
    3-4 s once); what made it slow was the work: importing black, jinja2 and the code
    generator. Through a fresh interpreter, the parse imports the committed module and
    none of them (issue 32: its time is the benchmark's to measure, not a test's)."""
    if not os.path.isfile(os.path.join(ROOT, QWEN_PARSER)):
        pytest.skip("no committed parser")
    argv = [sys.executable, "-X", "importtime", "-m", "compiler", "parse", QWEN_SPEC]
    result = subprocess.run(
        argv, input="<think>\nhm\n</think>\n\nHi<|im_end|>", capture_output=True,
        text=True, cwd=ROOT, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["reasoning_content"] == "hm"
    imported = {line.split("|")[-1].strip() for line in result.stderr.splitlines()}
    assert {"black", "jinja2", "compiler.codegen.module"}.isdisjoint(imported)


# --------------------------------------------------------------------------- explain


@pytest.mark.parametrize(
    "name",
    [
        QWEN,  # a reasoning turn shows the block
        NEMOTRON,  # the prompt opens it; earlier turns are cut at the closer
        "deepseek-ai-DeepSeek-V3.1.jinja",  # thinking off closes what both prompts open
        "CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja",  # an empty block, thinking off
        "moonshotai-Kimi-K2.jinja",
        "Kimi-K2-Thinking.jinja",  # the content-only turn writes an empty block
        "google-gemma-2-2b-it.jinja",  # no reasoning at all
    ],
)
def test_explain_shows_every_decision_with_its_renders(capsys, name):
    path = os.path.join(CORPUS, name)
    corpus_text(name)
    code, out, err = run(capsys, "explain", path)
    assert code == 0, err
    spec = analyzed(capsys, path)
    decisions = [line for line in out.splitlines() if line[:1].isdigit()]
    shown = "\n".join(decisions)
    # Every field of the format is decided somewhere, with the value the spec has.
    for section, keys in (
        ("content", ("mode", "start", "end")),
        ("end_of_turn", ("markers", "tokenizer_eos")),
    ):
        for key in keys:
            assert f"{section}.{key} = {spec[section][key]!r}" in shown
    if spec["reasoning"]["mode"] != "tools_only":  # decided by the tool-call analysis
        assert f"reasoning.mode = {spec['reasoning']['mode']!r}" in shown
    if spec["reasoning"]["mode"] not in ("none", "tools_only"):
        assert f"reasoning.end = {spec['reasoning']['end']!r}" in shown
        for key, value in spec["reasoning"]["opened_by_prompt"].items():
            assert f"reasoning.opened_by_prompt.{key} = {value}" in shown
    assert "A only" in out and "B only" in out
    assert "Traceback" not in err


def test_explain_shows_what_differs_and_elides_what_is_shared():
    shared = "".join(f"line {n} of a long system prompt\n" for n in range(200))
    left = Render("without", shared + "<|assistant|>\nanswer<|end|>\n" + shared)
    right = Render(
        "with", shared + "<|assistant|>\n<think>\nmusing\n</think>\nanswer<|end|>\n" + shared
    )
    text = explain([Evidence("reasoning.start = '<think>'", "because", left, right)])
    assert text.startswith("1. reasoning.start = '<think>'\n")
    assert "why: because" in text
    assert "A = without (" in text and "B = with (" in text
    assert "'<think>\\n'" in text and "'musing\\n'" in text  # repr, one line each
    assert "line 10 of" not in text  # the long common parts are elided…
    assert "'line 199 of a long system prompt\\n'" in text  # …but for the nearest context
    assert text.count("not shown") == 2
    assert max(map(len, text.splitlines())) < 120


def test_explain_of_a_decision_without_renders():
    text = explain([Evidence("reasoning.mode = 'tag'", "it follows")])
    assert text == (
        "1. reasoning.mode = 'tag'\n"
        "   why: it follows\n"
        "   (follows from the decisions above; no render of its own)\n"
    )


# --------------------------------------------------------------------------- bad input


def broken_template(tmp_path) -> str:
    return write(tmp_path / "broken.jinja", "{% for m in messages %}\n{{ m.content }\n")


@pytest.mark.parametrize(
    "argv, fragments",
    [
        (["analyze", "missing.jinja"], ["missing.jinja", "does not exist"]),
        (["explain", "missing-dir/"], ["missing-dir/"]),
        (["analyze", "{broken}"], ["broken.jinja:2"]),
        (["explain", "{broken}"], ["broken.jinja:2"]),
        (["parse", "missing.yaml"], ["missing.yaml", "cannot read"]),
        (["check", "--templates", "no-such-dir"], ["no-such-dir"]),
        (["build", "--templates", "no-such-dir"], ["no-such-dir"]),
        (["build", "--templates", "empty"], ["templates directory empty holds no .jinja files"]),
        (["check", "--templates", "empty"], ["templates directory empty holds no .jinja files"]),
        (["build", "--templates", "model"], ["model holds no .jinja files"]),  # mistyped
        (["analyze", "{gguf}"], ["fake.gguf", "not a GGUF file"]),
        (["analyze", "{cut}"], ["cut.gguf: truncated or damaged GGUF file"]),
        (["analyze", "model"], ["tokenizer_config.json: chat_template is a number, not a"]),
    ],
)
def test_bad_input_exits_2_with_one_line(tmp_path, capsys, monkeypatch, argv, fragments):
    monkeypatch.chdir(tmp_path)
    broken = broken_template(tmp_path)
    gguf = write(tmp_path / "fake.gguf", b"not a gguf file")
    cut = write(tmp_path / "cut.gguf", b"GGUF\x03\x00\x00\x00" + b"\x01" * 40)
    (tmp_path / "empty").mkdir()
    write(tmp_path / "model" / "tokenizer_config.json", json.dumps({"chat_template": 42}))
    argv = [arg.format(broken=broken, gguf=gguf, cut=cut) for arg in argv]
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert out == ""
    assert_one_line_error(err, *fragments)


def test_parse_names_a_spec_that_fails_the_schema(tree, capsys):
    write(QWEN_SPEC, read(QWEN_SPEC).replace("tokenizer_eos: false", "tokenizer_eos: 0"))
    code, _, err = run(capsys, "parse", QWEN_SPEC)
    assert code == 2
    assert_one_line_error(err, QWEN_SPEC, "end_of_turn.tokenizer_eos")


def test_debug_shows_the_traceback(tmp_path, capsys):
    from compiler.sources import SourceError

    for argv in (["--debug", "analyze", "missing.jinja"], ["analyze", "missing.jinja", "--debug"]):
        with pytest.raises(SourceError):
            main(argv)


def test_version(capsys):
    with pytest.raises(SystemExit) as caught:
        main(["--version"])
    assert caught.value.code == 0
    assert capsys.readouterr().out == "chatfmt 0.1.0\n"


@pytest.mark.parametrize(
    "command, defaults",
    [
        ("fetch", ["templates", ".cache/corpus"]),
        ("build", ["templates, or none when --source is given", "none", "specs", "generated"]),
        ("check", ["templates, or none when --source is given", "none", "specs", "generated"]),
        ("analyze", ["its own, named 'default'"]),
        ("parse", ["'generated' beside the spec's directory", "none",
                   "neither, as a request that gives no switch: the template's own default"]),
    ],
)
def test_help_shows_the_defaults(capsys, command, defaults):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    shown = " ".join(capsys.readouterr().out.split())  # argparse wraps lines
    for default in defaults:
        assert f"(default: {default})" in shown


# --------------------------------------------------------------------------- packaging


def test_the_license_is_an_spdx_expression_setuptools_takes():
    # The {text = ...} table is deprecated: setuptools warned on every install.
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as handle:
        project = tomllib.load(handle)
    assert project["project"]["license"] == "MIT"
    [setuptools] = project["build-system"]["requires"]
    assert setuptools == "setuptools>=77"  # the first release that reads an SPDX license


def test_pytest_shows_why_tests_were_skipped(tmp_path):
    """One line per test and reason, with a count: not one per skipped test; failures
    are still listed."""
    write(
        tmp_path / "test_skips.py",
        "import pytest\n\n"
        "@pytest.mark.parametrize('n', range(5))\n"
        "def test_it(n):\n"
        "    pytest.skip('the template cannot express this case')\n\n"
        "def test_fails():\n"
        "    assert False\n",
    )
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "-c", os.path.join(ROOT, "pyproject.toml"), "--rootdir", ".", "test_skips.py"],
        capture_output=True, text=True, cwd=tmp_path,
    )  # fmt: skip
    summary = result.stdout.split("short test summary info")[-1].splitlines()[1:-1]
    assert summary == [
        "SKIPPED [5] test_skips.py:5: the template cannot express this case",
        "FAILED test_skips.py::test_fails - assert False",
    ], result.stdout


def test_usage_errors_exit_2(capsys):
    with pytest.raises(SystemExit) as caught:
        main(["parse"])
    assert caught.value.code == 2


# --------------------------------------------------------------------------- plugin


def test_plugin_writes_one_file_with_the_module_and_no_compiler_import(capsys, tmp_path):
    out = tmp_path / "plugin.py"
    code, _, err = run(
        capsys, "plugin", "vllm", "specs/qwen_qwen3_0_6b.yaml", "-o", str(out), "--name", "q3"
    )
    assert code == 0, err
    text = out.read_text(encoding="utf-8")
    tree = ast.parse(text)
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add((node.module or "").split(".")[0])
    assert imported <= {"__future__", "json", "sys", "threading", "types", "uuid", "collections", "vllm"}
    names = {
        n.targets[0].id: n.value
        for n in tree.body
        if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name)
    }
    assert ast.literal_eval(names["NAME"]) == "q3"
    # The module is the spec's standalone export, verbatim.
    code, standalone, _ = run(capsys, "export", "standalone", "specs/qwen_qwen3_0_6b.yaml")
    assert code == 0 and standalone.startswith('"""Output parser for the')
    assert ast.literal_eval(names["MODULE_SOURCE"]) == standalone


def test_plugin_of_a_server_with_no_emitter_says_so(capsys, tmp_path, monkeypatch):
    import compiler.__main__ as cli

    monkeypatch.setattr(cli, "PLUGIN_SERVERS", ("vllm", "sglang", "nosuch"))
    code, _, err = run(
        capsys, "plugin", "nosuch", "specs/qwen_qwen3_0_6b.yaml", "-o", str(tmp_path / "p.py")
    )
    assert code == 2
    assert_one_line_error(err, "no nosuch plugin", "compiler.codegen.plugin_nosuch")
    assert not (tmp_path / "p.py").exists()


def test_plugin_name_the_flags_cannot_take_is_refused(capsys, tmp_path):
    code, _, err = run(
        capsys, "plugin", "vllm", "specs/qwen_qwen3_0_6b.yaml", "-o", str(tmp_path / "p.py"),
        "--name", "two words",
    )
    assert code == 2
    assert_one_line_error(err, "two words")


def test_plugin_for_a_format_with_neither_calls_nor_reasoning_is_refused_by_sglang(
    capsys, tmp_path
):
    # Gemma 2's template writes no tool calls and no reasoning block; where nothing
    # writes calls in our fallback format either (no tool definitions or past calls
    # written into the prompt), SGLang would have no detector to register, so the
    # command says why and writes nothing.
    with open("specs/google_gemma_2_2b_it.yaml", encoding="utf-8") as handle:
        body = yaml.safe_load(handle)
    body["polyfills"].update(fallback_call=None, tool_definitions=False, tool_calls=False)
    spec = tmp_path / "google_gemma_2_2b_it.yaml"
    spec.write_text(yaml.safe_dump(body, sort_keys=False), encoding="utf-8")
    out = tmp_path / "p.py"
    code, _, err = run(capsys, "plugin", "sglang", str(spec), "-o", str(out))
    assert code == 2
    assert_one_line_error(err, "google_gemma_2_2b_it", "neither tool calls nor reasoning")
    assert not out.exists()



# --------------------------------------------------------------------------- a new user's first use

DEVSTRAL = "unsloth-mistral-Devstral-Small-2507.jinja"
GOOD = "guillemet_calls.jinja"  # an invented template with calls


def files_in(folder) -> list[str]:
    return sorted(os.listdir(folder)) if os.path.isdir(folder) else []


def test_build_of_one_source_outside_the_repository_builds_it_alone(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no templates/ here
    write("model.jinja", corpus_text(QWEN))
    code, out, err = run(capsys, "build", "--source", "model.jinja", "--specs", "s",
                         "--generated", "g")  # fmt: skip
    assert code == 0, err
    assert out.startswith("1 templates: 1 specs and ")
    assert files_in("s") == ["model.yaml"]
    assert "model.py" in files_in("g")


def test_build_of_one_source_inside_the_repository_builds_it_alone(tmp_path, capsys, monkeypatch):
    if not os.path.isdir(CORPUS):
        pytest.skip("no corpus: run make templates")
    monkeypatch.chdir(ROOT)  # templates/ holds the corpus
    model = write(tmp_path / "model.jinja", corpus_text(QWEN))
    code, out, err = run(capsys, "build", "--source", model, "--specs", str(tmp_path / "s"),
                         "--generated", str(tmp_path / "g"))  # fmt: skip
    assert code == 0, err
    assert err.splitlines() == ["[1/1] model"]
    assert files_in(tmp_path / "s") == ["model.yaml"]


def test_check_of_one_source_checks_only_its_spec_and_module(tree, capsys):
    source = "templates/" + QWEN
    code, out, err = run(capsys, "check", "--source", source, "--specs", "specs",
                         "--generated", "generated")  # fmt: skip
    assert (code, out, err) == (0, "specs in specs and parsers in generated are up to date\n", "")
    write(QWEN_PARSER, read(QWEN_PARSER) + "# edited\n")
    code, out, _ = run(capsys, "check", "--source", source, "--specs", "specs",
                       "--generated", "generated")  # fmt: skip
    assert code == 1
    assert out.splitlines() == [
        f"{QWEN_PARSER}: differs from what {QWEN_SPEC} produces",
        f"1 problems: `chatfmt build --source {source} --specs specs "
        "--generated generated` rebuilds them",
    ]


def test_check_of_the_repository_layout_names_make_specs(tree, capsys):
    write(QWEN_PARSER, read(QWEN_PARSER) + "# edited\n")
    code, out, _ = run(capsys, *CHECK)
    assert code == 1
    assert out.splitlines()[-1] == "1 problems: `make specs` rebuilds them"


def test_rebuilding_from_another_folder_leaves_specs_and_modules_alone(tree, capsys, monkeypatch):
    assert specs.load(QWEN_SPEC)["template"]["path"] == f"../templates/{QWEN}"
    elsewhere = tree / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    code, out, err = run(capsys, "build", "--templates", "../templates", "--specs", "../specs",
                         "--generated", "../generated")  # fmt: skip
    assert (code, out) == (0, "2 templates: 0 specs and 0 generated files changed, 0 warnings\n")
    code, out, err = run(capsys, "build", "--templates", str(tree / "templates"), "--specs",
                         str(tree / "specs"), "--generated", str(tree / "generated"))  # fmt: skip
    assert (code, out) == (0, "2 templates: 0 specs and 0 generated files changed, 0 warnings\n")
    code, out, err = run(capsys, "check", "--templates", "../templates", "--specs", "../specs",
                         "--generated", "../generated")  # fmt: skip
    assert (code, err) == (0, ""), out


def built_stop(folder, slug: str) -> list[str]:
    return load_module(str(folder / "g" / f"{slug}.py")).STOP


def test_a_lone_template_takes_its_bos_and_eos_from_flags(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write("devstral.jinja", corpus_text(DEVSTRAL))
    code, _, err = run(capsys, "build", "--source", "devstral.jinja", "--bos-token", "<s>",
                       "--eos-token", "</s>", "--specs", "s", "--generated", "g")  # fmt: skip
    assert code == 0, err
    module = load_module("g/devstral.py")
    assert module.STOP[0] == "</s>"  # (then the next messages' headers: no tokenizer)
    assert module.parse("Hello.</s>")["content"] == "Hello."
    inputs = specs.load("s/devstral.yaml")["render_inputs"]
    assert (inputs["bos_token"], inputs["eos_token"]) == ("<s>", "</s>")
    # check needs the same flags: without them the render inputs differ.
    code, out, _ = run(capsys, "check", "--source", "devstral.jinja", "--specs", "s",
                       "--generated", "g")  # fmt: skip
    assert code == 1 and "render inputs of devstral.jinja changed" in out
    assert "--bos-token '<s>' --eos-token '</s>'" not in out
    code, out, _ = run(capsys, "check", "--source", "devstral.jinja", "--bos-token", "<s>",
                       "--eos-token", "</s>", "--specs", "s", "--generated", "g")  # fmt: skip
    assert code == 0, out


def test_a_lone_template_takes_its_bos_and_eos_from_a_tokenizer_config_beside_it(
    tmp_path, capsys
):
    model = tmp_path / "model"
    path = write(model / "devstral.jinja", corpus_text(DEVSTRAL))
    write(model / "tokenizer_config.json", json.dumps({"bos_token": "<s>", "eos_token": "</s>"}))
    spec = analyzed(capsys, path)
    inputs = spec["render_inputs"]
    assert (inputs["bos_token"], inputs["eos_token"]) == ("<s>", "</s>")
    flags = analyzed(capsys, write(tmp_path / "devstral.jinja", corpus_text(DEVSTRAL)),
                     "--bos-token", "<s>", "--eos-token", "</s>")  # fmt: skip
    assert format_of(spec) == format_of(flags)


def test_token_flags_without_a_jinja_source_are_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write("model/tokenizer_config.json", json.dumps({"chat_template": "{{ messages }}"}))
    code, out, err = run(capsys, "build", "--source", "model", "--eos-token", "</s>")
    assert (code, out) == (2, "")
    assert_one_line_error(err, "--bos-token and --eos-token are for a .jinja file")


NOT_TEMPLATES = {  # name: (text, the error)
    "prose": (
        "A chat template\nwrites each message. This file only talks about it.\n",
        "not a chat template: it renders the conversation without the user's message",
    ),
    "empty": ("", "the template is empty"),
    "blank": ("  \n\t\n", "the template is empty"),
}


@pytest.mark.parametrize("name", list(NOT_TEMPLATES))
def test_a_file_that_is_no_chat_template_fails_by_name(tmp_path, capsys, monkeypatch, name):
    monkeypatch.chdir(tmp_path)
    text, why = NOT_TEMPLATES[name]
    write(f"templates/{name}.jinja", text)
    write("templates/good.jinja", read(os.path.join(ROOT, "tests", "invented", GOOD)))
    code, out, err = run(capsys, "build", "--templates", "templates", "--specs", "s",
                         "--generated", "g")  # fmt: skip
    assert code == 2
    [error] = [line for line in err.splitlines() if line.startswith("error: ")]
    assert error.startswith(f"error: templates/{name}.jinja: {why}"), error
    assert files_in("s") == ["good.yaml"]
    assert not [file for file in files_in("g") if file.startswith(name)]
    code, out, err = run(capsys, "analyze", f"templates/{name}.jinja")
    assert (code, out) == (2, "")
    assert_one_line_error(err, f"templates/{name}.jinja: {why}")


def test_parse_reads_bytes_that_are_not_utf8_as_replacement_characters(tree):
    result = subprocess.run(
        [sys.executable, "-m", "compiler", "parse", QWEN_SPEC],
        input=b"caf\xe9 \xff\xfe ok<|im_end|>",
        capture_output=True,
        env={**os.environ, "PYTHONPATH": ROOT},
    )
    assert (result.returncode, result.stderr) == (0, b"")
    message = json.loads(result.stdout.decode("utf-8"))  # strict: valid UTF-8
    assert message["content"] == "caf\ufffd \ufffd\ufffd ok"


def test_parse_into_a_reader_that_stops_says_nothing(tree):
    write("long.txt", "word " * 100_000)  # more than a pipe holds
    command = f"{shlex.quote(sys.executable)} -m compiler parse {QWEN_SPEC} < long.txt | head -c 10"
    result = subprocess.run(
        command, shell=True, capture_output=True, env={**os.environ, "PYTHONPATH": ROOT}
    )
    assert result.stdout == b'{\n  "role"'
    assert result.stderr == b""


def test_a_symlink_loop_is_reported(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    os.makedirs("templates")
    os.symlink("loop.jinja", "templates/loop.jinja")
    code, out, err = run(capsys, "build", "--templates", "templates")
    assert (code, out) == (2, "")
    assert_one_line_error(err, "templates/loop.jinja is a symlink that leads nowhere")


def test_a_symlink_out_of_the_folder_is_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write("elsewhere/secret.jinja", "{{ messages[0].content }}")
    write("templates/own.jinja", "{{ messages[0].content }}")
    os.symlink("own.jinja", "templates/same.jinja")  # inside the folder: a template
    os.symlink("../elsewhere/secret.jinja", "templates/out.jinja")
    code, out, err = run(capsys, "build", "--templates", "templates")
    assert (code, out) == (2, "")
    assert_one_line_error(
        err, f"templates/out.jinja is a symlink out of templates (to {tmp_path}/elsewhere/secret"
    )
    os.remove("templates/out.jinja")
    assert [source.slug for source in discover("templates")] == ["own", "same"]


# --------------------------------------------------------------------------- -o, and inputs

OLD = "the old file\n"


def files_under(folder) -> dict[str, bytes]:
    """Every file under ``folder`` (links not followed) with its bytes."""
    found = {}
    for top, _, names in os.walk(folder):
        for name in names:
            path = os.path.join(top, name)
            if not os.path.islink(path):
                with open(path, "rb") as handle:
                    found[os.path.relpath(path, folder)] = handle.read()
    return found


def writing(out: str) -> dict[str, list[str]]:
    """Each command that takes -o, writing to ``out``."""
    return {
        "analyze": ["analyze", os.path.join(CORPUS, QWEN), "-o", out],
        "export": ["export", "standalone", QWEN_SPEC_IN_REPO, "-o", out],
        "plugin": ["plugin", "vllm", QWEN_SPEC_IN_REPO, "-o", out],
        "plugin --auto": ["plugin", "sglang", "--auto", "-o", out],
    }


@pytest.mark.parametrize("command", list(writing("")))
def test_o_replaces_the_file_whole_never_rewrites_it_in_place(tmp_path, capsys, command):
    corpus_text(QWEN)
    out = write(tmp_path / "out", OLD)
    os.chmod(out, 0o640)
    with open(out, encoding="utf-8") as reader:  # a process that opened it before
        code, _, err = run(capsys, *writing(out)[command])
        assert code == 0, err
        assert reader.read() == OLD  # rewritten in place, it would read the new text
    assert read(out) != OLD
    assert os.listdir(tmp_path) == ["out"]  # no temporary file left beside it
    assert os.stat(out).st_mode & 0o777 == 0o640  # the file's own mode is kept


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary_one(
    tmp_path, capsys, monkeypatch
):
    out = write(tmp_path / "out.py", OLD)

    def full_disk(source, destination):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full_disk)
    code, stdout, err = run(capsys, "export", "standalone", QWEN_SPEC_IN_REPO, "-o", out)
    assert (code, stdout) == (2, "")
    assert_one_line_error(err, f"cannot write {out}", "No space left on device")
    assert read(out) == OLD
    assert os.listdir(tmp_path) == ["out.py"]


def test_o_through_a_symlink_replaces_the_file_it_names(tmp_path, capsys):
    target = write(tmp_path / "real" / "qwen.gbnf", OLD)
    link = tmp_path / "qwen.gbnf"
    link.symlink_to(target)
    code, grammar, _ = run(capsys, "export", "gbnf", QWEN_SPEC_IN_REPO)
    assert code == 0
    code, _, err = run(capsys, "export", "gbnf", QWEN_SPEC_IN_REPO, "-o", str(link))
    assert code == 0, err
    assert link.is_symlink() and read(target) == grammar
    assert sorted(os.listdir(tmp_path / "real")) == ["qwen.gbnf"]


def test_o_that_is_no_regular_file_is_written_to(tmp_path, capsys):
    """A device or a pipe has nothing to replace: it is written to, and stays."""
    code, _, err = run(capsys, "export", "gbnf", QWEN_SPEC_IN_REPO, "-o", os.devnull)
    assert code == 0, err
    assert not os.path.isfile(os.devnull)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE)
    code, grammar, _ = run(capsys, "export", "gbnf", QWEN_SPEC_IN_REPO)
    assert run(capsys, "export", "gbnf", QWEN_SPEC_IN_REPO, "-o", str(fifo))[0] == 0
    assert reader.communicate(timeout=60)[0].decode("utf-8") == grammar


# A tools list whose property name is a lone surrogate (JSON's "\ud800" escape): no
# Unicode text can hold it, so no grammar or output file can either.
LONE_SURROGATE_TOOLS = json.dumps(
    [
        {
            "type": "function",
            "function": {
                "name": "f",
                "parameters": {"type": "object", "properties": {"\ud800": {"type": "string"}}},
            },
        }
    ]
)


@pytest.mark.parametrize("kind", ["gbnf", "tool-call-gbnf", "structural-tag"])
def test_a_tools_file_that_is_not_unicode_is_bad_input_and_the_old_output_stays(
    tmp_path, capsys, kind
):
    assert "\\ud800" in LONE_SURROGATE_TOOLS
    tools = write(tmp_path / "tools.json", LONE_SURROGATE_TOOLS)
    out = write(tmp_path / "out", OLD)
    argv = ["export", kind, "specs/qwen3_coder.yaml", "--tools", tools, "-o", out]
    code, stdout, err = run(capsys, *argv)
    assert (code, stdout) == (2, "")
    assert_one_line_error(err, tools, "0.function.parameters.properties", "\\ud800")
    assert "compiler bug" not in err
    assert read(out) == OLD


def test_a_tools_file_with_nan_is_not_json(tmp_path, capsys):
    tools = write(tmp_path / "tools.json", json.dumps([samples.TOOL])[:-1] + ', {"x": NaN}]')
    code, _, err = run(capsys, "export", "gbnf", QWEN_SPEC_IN_REPO, "--tools", tools)
    assert code == 2
    assert_one_line_error(err, tools, "is not valid JSON", "NaN")


@pytest.mark.parametrize(
    "case",
    [
        "analyze the template",
        "analyze the template by a link",
        "analyze by another spelling",
        "analyze a model's config",
        "analyze a lone template's manifest",
        "export the spec",
        "export the tools",
        "plugin the spec",
    ],
)
def test_o_is_never_an_input(tmp_path, capsys, monkeypatch, case):
    monkeypatch.chdir(tmp_path)
    template = write("t/t.jinja", corpus_text(QWEN))
    write("t/manifest.json", json.dumps({"templates": {}}))
    write("model/chat_template.jinja", corpus_text(QWEN))
    write("model/tokenizer_config.json", json.dumps({"eos_token": "<|im_end|>"}))
    spec = write("qwen_qwen3_0_6b.yaml", read(QWEN_SPEC_IN_REPO))
    tools = write("tools.json", json.dumps([samples.TOOL]))
    os.symlink("t/t.jinja", "link.jinja")
    argv = {
        "analyze the template": ["analyze", template, "-o", template],
        "analyze the template by a link": ["analyze", template, "-o", "link.jinja"],
        "analyze by another spelling": ["analyze", template, "-o", "./t/../t/t.jinja"],
        "analyze a model's config": ["analyze", "model", "-o", "model/tokenizer_config.json"],
        "analyze a lone template's manifest": ["analyze", template, "-o", "t/manifest.json"],
        "export the spec": ["export", "standalone", spec, "-o", spec],
        "export the tools": ["export", "gbnf", spec, "--tools", tools, "-o", tools],
        "plugin the spec": ["plugin", "vllm", spec, "-o", spec],
    }[case]
    before = files_under(tmp_path)
    code, out, err = run(capsys, *argv)
    assert (code, out) == (2, "")
    assert_one_line_error(err, f"-o {argv[-1]}", "which this command reads")
    assert files_under(tmp_path) == before


def _limited_memory() -> None:  # in the child, before it runs: 2 GiB of address space
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")
@pytest.mark.parametrize(
    "argv, stdin, what",
    [
        (["parse", QWEN_SPEC_IN_REPO, "--tools", "/dev/zero"], None, "/dev/zero"),
        (["export", "gbnf", QWEN_SPEC_IN_REPO, "--tools", "/dev/zero"], None, "/dev/zero"),
        (["parse", QWEN_SPEC_IN_REPO], "/dev/zero", "standard input"),
        (["analyze", "zero.jinja"], None, "zero.jinja"),
        (["analyze", "model"], None, "model/chat_template.jinja"),
        (["build", "--source", "model", "--specs", "s", "--generated", "g"], None, "model/"),
    ],
    ids=["parse --tools", "export --tools", "parse stdin", "a template", "a model", "build"],
)
def test_an_endless_input_is_read_within_a_bound(tmp_path, argv, stdin, what):
    """An input without end is refused once it passes the bound (read unbounded, it
    would fill the memory: the child has 2 GiB of address space to find out in). A
    model directory takes regular files only: its template is a file of 64 MiB (sparse:
    no disk)."""
    os.symlink("/dev/zero", tmp_path / "zero.jinja")
    (tmp_path / "model").mkdir()
    with open(tmp_path / "model" / "chat_template.jinja", "wb") as handle:
        handle.truncate(64 << 20)
    with open(stdin or os.devnull, "rb") as source:
        result = subprocess.run(
            [sys.executable, "-m", "compiler", *argv],
            stdin=source,
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env={**os.environ, "PYTHONPATH": ROOT},
            preexec_fn=_limited_memory,
            timeout=600,  # a guard against a hang, not a measure
        )
    assert result.returncode == 2
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and what in errors[0] and "larger than" in errors[0], result.stderr


@pytest.mark.parametrize(
    "argv, flag",
    [
        (["build", "--source", "t.jinja", "--specs", "afile"], "--specs"),
        (["build", "--source", "t.jinja", "--generated", "afile"], "--generated"),
        (["build", "--templates", "afile"], "--templates"),
        (["check", "--source", "t.jinja", "--specs", "afile"], "--specs"),
        (["check", "--source", "t.jinja", "--generated", "afile"], "--generated"),
        (["fetch", "--templates", "afile"], "--templates"),
        (["fetch", "--templates", "corpus", "--cache", "afile"], "--cache"),
        (["parse", "qwen.yaml", "--generated", "afile"], "--generated"),
        (["plugin", "vllm", "--auto", "--cache", "afile", "-o", "p.py"], "--cache"),
    ],
)
def test_a_folder_flag_that_names_a_file_is_bad_input(
    tmp_path, capsys, monkeypatch, argv, flag
):
    monkeypatch.chdir(tmp_path)
    write("afile", OLD)
    write("t.jinja", corpus_text(QWEN))
    write("qwen.yaml", read(QWEN_SPEC_IN_REPO))
    write("corpus/manifest.json", read(os.path.join(CORPUS, "manifest.json")))
    before = files_under(tmp_path)
    code, out, err = run(capsys, *argv)
    assert (code, out) == (2, "")
    assert_one_line_error(err, f"{flag} afile is a file, not a folder")
    assert files_under(tmp_path) == before


def test_a_folder_the_build_cannot_make_is_bad_input(tmp_path):
    from compiler.build import BuildError, build

    write(tmp_path / "afile", OLD)
    with pytest.raises(BuildError, match="cannot make the folder .*afile/specs: Not a directory"):
        build([], str(tmp_path / "afile" / "specs"), str(tmp_path / "generated"))


@pytest.mark.parametrize(
    "argv",
    [["parse"], ["nosuch"], ["export", "nosuch", QWEN_SPEC_IN_REPO], ["build", "--jobs", "x"]],
)
def test_a_usage_error_is_one_line(capsys, argv):
    with pytest.raises(SystemExit) as caught:
        main(argv)
    assert caught.value.code == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert_one_line_error(err, "--help")


# --------------------------------------------------------------------------- YAML values


def spec_with_variable(folder, value_yaml: str) -> str:
    """The Qwen3 spec with one template variable, written as YAML text."""
    text = read(QWEN_SPEC_IN_REPO)
    assert "  variables: {}\n" in text
    text = text.replace("  variables: {}\n", f"  variables:\n    today: {value_yaml}\n")
    return write(os.path.join(folder, "qwen_qwen3_0_6b.yaml"), text)


def test_a_yaml_date_is_the_text_written_for_the_template_and_the_module(tmp_path, capsys):
    spec = spec_with_variable(tmp_path, "2024-06-01")
    # What the template is given (the renders read the spec's inputs as loaded) ...
    assert specs.load(spec)["render_inputs"]["variables"] == {"today": "2024-06-01"}
    # ... is what the standalone module holds, and the file imports.
    out = tmp_path / "qwen.py"
    code, _, err = run(capsys, "export", "standalone", spec, "-o", str(out))
    assert code == 0, err
    result = subprocess.run(
        [sys.executable, "-c", "import runpy, sys; m = runpy.run_path(sys.argv[1]); "
         "print(m['SPEC']['render_inputs']['variables']['today'])", str(out)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert (result.returncode, result.stdout, result.stderr) == (0, "2024-06-01\n", "")


@pytest.mark.parametrize(
    "value_yaml, fragment",
    [
        (".nan", "nan is no JSON number"),
        ("-.inf", "-inf is no JSON number"),
        ("1.0e+999", "inf is no JSON number"),
        ("!!binary aGk=", "bytes"),
        ("!!set {a}", "set"),
        ("{1: one}", "a key that is not a string: 1"),
    ],
)
@pytest.mark.parametrize("command", ["export standalone", "plugin vllm", "parse"])
def test_a_yaml_value_json_cannot_hold_is_refused_with_its_path(
    tmp_path, capsys, monkeypatch, value_yaml, fragment, command
):
    spec = spec_with_variable(tmp_path, value_yaml)
    out = tmp_path / "out.py"
    monkeypatch.setattr(sys, "stdin", io.StringIO("Hi"))
    argv = [*command.split(), spec, *(["-o", str(out)] if command != "parse" else [])]
    code, stdout, err = run(capsys, *argv)
    assert (code, stdout) == (2, "")
    assert_one_line_error(err, f"{spec}: render_inputs.variables.today", fragment)
    assert not out.exists()


def test_a_manifest_value_json_cannot_hold_is_refused_with_its_path(tmp_path, capsys):
    """Python's json reads NaN; the spec the analysis would write could not hold it."""
    text = corpus_text(QWEN)
    path = write(tmp_path / QWEN, text)
    entry = {"sha256": hashlib.sha256(text.encode()).hexdigest(), "inputs": {"variables": {}}}
    corpus = {"package": "p", "version": "0", "sha256": "0" * 64, "member_dir": "t"}
    manifest = json.dumps({"corpus": corpus, "templates": {QWEN: entry}})
    manifest = manifest.replace('"variables": {}', '"variables": {"x": NaN}')
    write(tmp_path / "manifest.json", manifest)
    code, out, err = run(capsys, "analyze", path)
    assert (code, out) == (2, "")
    assert_one_line_error(err, "render_inputs.variables.x: nan is no JSON number")
