"""The auto plugin (``python -m compiler plugin sglang --auto``) started as its launcher
starts it (``make test-servers``; skipped where SGLang is not installed).

Each start sets the launcher's command line (``python THIS_FILE serve --model-path
MODEL --tool-call-parser NAME --reasoning-parser NAME``), imports the file as the
processes SGLang spawns import it (the launcher itself then hands the command line to
SGLang), and parses the command line with SGLang's own ``ServerArgs`` arguments, which
take a parser name only where it is registered. A model is a folder with a tokenizer
whose chat template is the one served (tests/servers/auto_setup.py). Reading goes
through SGLang's ``ReasoningParser`` and ``FunctionCallParser`` as
tests/servers/test_sglang_plugin.py drives them.

- Every corpus template, analysed at start-up (and its analysis reused, the second
  time): the messages are the per-model plugin's (``plugin sglang SPEC``) for every round-trip text, whole,
  as one increment, one character per increment and cut in two at eight points; the
  parser flag of a part the format lacks is taken out of the command line. Templates
  that write neither calls nor reasoning, or that the analysis cannot render without
  the inputs their spec records, are refused in one line.
- Every corpus template with the repository's specs as the reviewed specs: the parser
  is the per-model plugin's, byte for byte.
- An invented template, and the refusals, as for vLLM; and the launcher run as a
  process: it starts up, registers, and SGLang's command line lists the name.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from compiler.codegen import plugin_sglang
from tests import roundtrip as rt
from tests.servers import auto_setup as setup

fcp = pytest.importorskip("sglang.srt.function_call.function_call_parser")
reasoning_parser = pytest.importorskip("sglang.srt.parser.reasoning_parser")
server_args = pytest.importorskip("sglang.srt.server_args")

from tests.servers import test_sglang_plugin as per_model  # noqa: E402

SLUGS = sorted(setup.corpus())
CUTS = 8


@functools.cache
def plugin_file(name: str) -> Path:
    folder = setup.workdir() / "sglang-plugins"
    folder.mkdir(exist_ok=True)
    path = folder / f"auto_sglang_{re.sub(r'[^a-z0-9]', '_', name.lower())}.py"
    path.write_text(plugin_sglang.auto_text(name), encoding="utf-8")
    return path


def launch(model: Path, name: str, monkeypatch, *flags: str):
    """``python PLUGIN serve --model-path MODEL ... --tool-call-parser NAME
    --reasoning-parser NAME``, fresh, up to where SGLang has read its arguments:
    (the plugin module, SGLang's arguments)."""
    plugin = plugin_file(name)
    setup.fresh(name, plugin.stem)
    argv = [str(plugin), "serve", "--model-path", str(model), *flags,
            "--tool-call-parser", name, "--reasoning-parser", name]
    monkeypatch.setattr(sys, "argv", argv)
    spec = importlib.util.spec_from_file_location(plugin.stem, plugin)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[plugin.stem] = module
    spec.loader.exec_module(module)
    parser = argparse.ArgumentParser()
    server_args.ServerArgs.add_cli_args(parser)
    return module, parser.parse_args(sys.argv[2:])


@pytest.fixture
def env(monkeypatch):
    for name in list(os.environ):
        if name.startswith("CHATFMT_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("CHATFMT_CACHE", str(setup.cache("sglang")))
    return monkeypatch


def started(call, slug: str, capfd, again: bool = False):
    """(the plugin and SGLang's arguments, or the SystemExit; the line; how it went)."""
    with setup.timed("sglang", slug) as clock:
        try:
            result = call()
        except SystemExit as refused:  # the line Python prints as the process ends
            result = refused
    err = capfd.readouterr().err
    line = str(result.code) if isinstance(result, SystemExit) else setup.start_line(err)
    return result, line, clock.record(line, again)


def assert_refused(result, line: str, name: str, why: str) -> None:
    assert isinstance(result, SystemExit), line
    assert line.startswith(f"chatfmt: refusing to start the {name!r} parsers: ")
    assert why in line, line
    assert name not in fcp.FunctionCallParser.ToolCallParserEnum
    assert name not in reasoning_parser.ReasoningParser.DetectorMap


def pieces(text: str) -> list[list[str]]:
    step = max(1, len(text) // (CUTS + 1))
    cuts = [[text[:at], text[at:]] for at in range(step, len(text), step)][:CUTS]
    return [[text], list(text), *cuts]


def messages(slug: str, name: str) -> list:
    """What SGLang sends for every round-trip text of ``slug`` with the detectors
    registered as ``name``."""
    found = []
    for case in per_model._cases(slug):
        named = dataclasses.replace(case, slug=name)
        found.append(per_model.Server(named, spec=slug).whole(case.text))
        found += [per_model.Server(named, spec=slug).stream(chunks) for chunks in pieces(case.text)]
    return found


def registered(name: str, args) -> tuple[bool, bool]:
    """(calls, reasoning) registered under ``name``, checked against the arguments
    SGLang read: the flag of a part that is not registered was taken out."""
    calls = name in fcp.FunctionCallParser.ToolCallParserEnum
    reasoning = name in reasoning_parser.ReasoningParser.DetectorMap
    assert (args.tool_call_parser == name) == calls
    assert (args.reasoning_parser == name) == reasoning
    return calls, reasoning


@pytest.mark.parametrize("slug", SLUGS)
def test_a_corpus_template_analysed_at_start_gives_the_per_model_messages(
    slug, env, capfd
):
    name = f"auto-{slug}"
    cached = setup.cached("sglang", setup.corpus()[slug])
    launched, line, said = started(
        lambda: launch(setup.corpus_model(slug), name, env), slug, capfd
    )
    if setup.writes_nothing(slug):
        assert_refused(launched, line, name, "neither tool calls nor reasoning")
        return
    if rt.load_spec(slug)["render_inputs"]["variables"]:
        assert_refused(launched, line, name, "the analysis of the chat template")
        return
    # analysed, but where a twin (the same text, another name) was analysed before
    assert said == ("cached" if cached else "analysed"), line
    assert "python -m compiler explain" in line
    module, args = launched
    per_model.plugin(slug)
    assert registered(name, args) == (per_model._has_calls(slug), per_model._has_reasoning(slug))
    want = messages(slug, slug)
    assert messages(slug, name) == want
    # A second start (a new server on this machine) reuses the analysis.
    launched, line, said = started(
        lambda: launch(setup.corpus_model(slug), name, env), slug, capfd
    )
    assert said == "cached", line
    assert messages(slug, name)[:3] == want[:3]


@pytest.mark.parametrize("slug", SLUGS)
def test_a_reviewed_spec_gives_the_per_model_plugins_parser(slug, env, capfd):
    env.setenv("CHATFMT_SPECS", str(setup.SPECS))
    name = f"reviewed-{slug}"
    launched, line, said = started(
        lambda: launch(setup.corpus_model(slug), name, env), slug, capfd
    )
    if setup.writes_nothing(slug):
        assert_refused(launched, line, name, "neither tool calls nor reasoning")
        return
    reviewed = setup.reviewed_for(slug)
    assert said == "reviewed" and str(setup.SPECS / f"{reviewed}.yaml") in line, line
    module, _ = launched
    assert module.MODULE_SOURCE == per_model.plugin(reviewed).MODULE_SOURCE
    # A second start reads the parser the first wrote.
    launched, line, said = started(
        lambda: launch(setup.corpus_model(slug), name, env), slug, capfd, again=True
    )
    assert said == "reviewed", line
    assert launched[0].MODULE_SOURCE == per_model.plugin(reviewed).MODULE_SOURCE


def test_an_invented_template_is_analysed_and_served(env, capfd):
    model = setup.model_folder(
        "muse_invoke", setup.INVENTED.read_text(encoding="utf-8"), *setup.INVENTED_TOKENS
    )
    name = "auto-invented"
    launched, line, said = started(lambda: launch(model, name, env), "muse_invoke", capfd)
    assert said in ("analysed", "cached"), line
    module, args = launched
    assert registered(name, args) == (True, True)
    # The plugin reads the module the start-up loaded: it is compiled once.
    assert module.fmt is sys.modules[f"{plugin_file(name).stem}_format"]
    failures = []
    for text, message in setup.invented_cases():
        case = rt.Case(name, rt.TOOL_KINDS[0], text, "", "", message, [setup.WEATHER])
        # the thinking setting as SGLang passes it: the template has no switch, so on
        case = dataclasses.replace(case, kind=dataclasses.replace(case.kind, enable_thinking=True))
        want = setup.as_sent(message)
        got = [per_model.Server(case).whole(text)]
        got += [per_model.Server(case).stream(chunks) for chunks in pieces(text)]
        for sent in got:
            sent = {
                "content": sent["content"] or None,  # SGLang's normal_text: "" for none
                "reasoning": sent["reasoning"] or None,
                "calls": [[n, json.dumps(a)] for n, a in sent["calls"]],
            }
            if not setup.same_message(sent, want):
                failures.append((text, sent))
    assert not failures, failures[:3]


@pytest.mark.parametrize(
    "kind, template, why",
    [("plain", setup.PLAIN, "neither tool calls nor reasoning"),
     ("broken", setup.BROKEN, "the analysis of the chat template")],
    ids=["plain", "broken"],
)
def test_a_template_with_nothing_to_read_stops_the_launcher(env, capfd, kind, template, why):
    model = setup.model_folder(f"refused-{kind}", template)
    name = f"sglang-refused-{kind}"
    result, line, _ = started(lambda: launch(model, name, env), "refused", capfd)
    assert_refused(result, line, name, why)


def test_the_launcher_registers_before_sglang_reads_its_command_line(env, tmp_path):
    """Run as a process, as docs/serving.md says: the start-up line, then SGLang's own
    command line, whose help lists the name among both flags' choices."""
    plugin = tmp_path / "chatfmt_sglang.py"
    plugin.write_text(plugin_sglang.auto_text("chatfmt"), encoding="utf-8")
    model = setup.model_folder(
        "muse_invoke", setup.INVENTED.read_text(encoding="utf-8"), *setup.INVENTED_TOKENS
    )
    done = subprocess.run(
        [sys.executable, str(plugin), "serve", "--model-path", str(model),
         "--tool-call-parser", "chatfmt", "--reasoning-parser", "chatfmt", "--help"],
        capture_output=True, text=True, cwd=tmp_path, timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert setup.how(setup.start_line(done.stderr)) in ("analysed", "cached")
    choices = re.findall(r"--(tool-call|reasoning)-parser \{([^}]*)\}", done.stdout)
    assert {flag for flag, names in choices if "chatfmt" in names.split(",")} == {
        "tool-call", "reasoning"
    }


def test_zz_figures():
    print("\n" + setup.figures("sglang"))
