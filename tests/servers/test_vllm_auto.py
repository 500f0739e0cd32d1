"""The auto plugin (``python -m compiler plugin vllm --auto``) started as `vllm serve`
starts it (``make test-servers``; skipped where vLLM is not installed).

Each start parses `vllm serve`'s arguments with vLLM's own parser, then runs what its
API server runs before it serves (``init_parser_plugin``, which imports the plugin for
each of the two flags, and ``validate_api_server_args``), and composes the parser
class with vLLM's ``ParserManager``. A model is a folder with a tokenizer whose chat
template is the one served (tests/servers/auto_setup.py).

- Every corpus template, analysed at start-up (or its analysis reused, the second
  time): the messages are the per-model plugin's (``plugin vllm SPEC``), for every
  round-trip text of the template, not streamed and streamed as one delta, one
  character a delta and cut in two at eight points. The templates that write neither
  calls nor reasoning, or that the analysis cannot render without the inputs their
  spec records, are refused in one line.
- Every corpus template with the repository's specs as the reviewed specs: the parser
  is the per-model plugin's, byte for byte.
- An invented template (tests/invented/muse_invoke.jinja), with the tokenizer's bos and
  eos: the messages are the ones the template rendered.
- A template without calls or reasoning, and a broken one: refused in one line, and no
  parser is registered.
"""

from __future__ import annotations

import functools
import os
import re
import sys
from pathlib import Path

import pytest

from compiler.codegen import plugin_vllm
from tests import roundtrip as rt
from tests.servers import auto_setup as setup

pytest.importorskip("vllm")
# No accelerator here: vLLM's argument parser asks the platform for a device.
os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")

from vllm.entrypoints.common.cli_args import (  # noqa: E402
    init_parser_plugin,
    make_arg_parser,
    validate_api_server_args,
)
from vllm.parser.parser_manager import ParserManager  # noqa: E402
from vllm.tool_parsers import ToolParserManager  # noqa: E402
from vllm.utils.argparse_utils import FlexibleArgumentParser  # noqa: E402

from tests.servers import test_vllm_plugin as per_model  # noqa: E402

SLUGS = sorted(setup.corpus())
CUTS = 8


@functools.cache
def _vllm_parser():
    return make_arg_parser(FlexibleArgumentParser())


@functools.cache
def plugin_file(name: str) -> Path:
    folder = setup.workdir() / "vllm-plugins"
    folder.mkdir(exist_ok=True)
    path = folder / f"auto_vllm_{re.sub(r'[^a-z0-9]', '_', name.lower())}.py"
    path.write_text(plugin_vllm.auto_text(name), encoding="utf-8")
    return path


def serve(model: Path, name: str, *flags: str):
    """`vllm serve MODEL` with the auto plugin under ``name``, fresh, up to the parser
    class its chat endpoint uses."""
    plugin = plugin_file(name)
    setup.fresh(name, plugin.stem)
    args = _vllm_parser().parse_args(
        [
            "--model", str(model), *flags,
            "--tool-parser-plugin", str(plugin), "--enable-auto-tool-choice",
            "--tool-call-parser", name,
            "--reasoning-parser-plugin", str(plugin), "--reasoning-parser", name,
        ]
    )
    init_parser_plugin(args)
    validate_api_server_args(args)
    return ParserManager.get_parser(
        tool_parser_name=name, reasoning_parser_name=name, enable_auto_tools=True
    )


@pytest.fixture
def env(monkeypatch):
    for name in list(os.environ):
        if name.startswith("CHATFMT_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("CHATFMT_CACHE", str(setup.cache("vllm")))
    return monkeypatch


def started(server_call, slug: str, capfd, again: bool = False):
    """(the parser class or the SystemExit, the start-up's line, how it went)."""
    with setup.timed("vllm", slug) as clock:
        try:
            result = server_call()
        except SystemExit as refused:  # the line Python prints as the process ends
            result = refused
    err = capfd.readouterr().err
    line = str(result.code) if isinstance(result, SystemExit) else setup.start_line(err)
    return result, line, clock.record(line, again)


def splits(text: str) -> list[list[str]]:
    step = max(1, len(text) // (CUTS + 1))
    cuts = [[text[:at], text[at:]] for at in range(step, len(text), step)][:CUTS]
    return [[text], list(text), *cuts]


def messages(cls, slug: str) -> list:
    """What vLLM sends for every round-trip text of ``slug`` through the parser class."""
    found = []
    for case in per_model.cases(slug):
        request = per_model.request_for(case)
        found.append(per_model.one_shot(cls, case, request))
        found += [per_model.streamed(cls, case, request, chunks) for chunks in splits(case.text)]
    return found


def assert_refused(result, line: str, name: str, why: str) -> None:
    assert isinstance(result, SystemExit), line
    assert str(result.code) == line  # the one line is the exit's message
    assert line.startswith(f"chatfmt: refusing to start the {name!r} parsers: ")
    assert why in line, line
    assert name not in ToolParserManager.list_registered()


@pytest.mark.parametrize("slug", SLUGS)
def test_a_corpus_template_analysed_at_start_gives_the_per_model_messages(slug, env, capfd):
    name = f"auto-{slug}"
    cached = setup.cached("vllm", setup.corpus()[slug])
    result, line, said = started(lambda: serve(setup.corpus_model(slug), name), slug, capfd)
    if setup.writes_nothing(slug):
        assert_refused(result, line, name, "neither tool calls nor reasoning")
        return
    if rt.load_spec(slug)["render_inputs"]["variables"]:
        # Its spec records variables the template reads; without them it cannot render.
        assert_refused(result, line, name, "the analysis of the chat template")
        return
    # analysed, but where a twin (the same text, another name) was analysed before
    assert said == ("cached" if cached else "analysed"), line
    assert "python -m compiler explain" in line
    cls = result
    want = messages(per_model.parser_class(slug, str(setup.workdir())), slug)
    assert messages(cls, slug) == want
    # A second start (a new server on this machine) reuses the analysis.
    again, line, said = started(lambda: serve(setup.corpus_model(slug), name), slug, capfd)
    assert said == "cached", line
    assert messages(again, slug)[:3] == want[:3]


@pytest.mark.parametrize("slug", SLUGS)
def test_a_reviewed_spec_gives_the_per_model_plugins_parser(slug, env, capfd):
    env.setenv("CHATFMT_SPECS", str(setup.SPECS))
    name = f"reviewed-{slug}"
    result, line, said = started(lambda: serve(setup.corpus_model(slug), name), slug, capfd)
    if setup.writes_nothing(slug):
        assert_refused(result, line, name, "neither tool calls nor reasoning")
        return
    # Two corpus templates have a twin of another name: the first spec by name serves.
    reviewed = setup.reviewed_for(slug)
    assert said == "reviewed" and str(setup.SPECS / f"{reviewed}.yaml") in line, line
    loaded = sys.modules[f"{plugin_file(name).stem}_format"]
    embedded = per_model._embedded(per_model.ast.parse(per_model.plugin_text(reviewed)))
    assert loaded.SOURCE == embedded
    case = next(iter(per_model.cases(slug)), None)
    if case is not None:
        request = per_model.request_for(case)
        per_cls = per_model.parser_class(slug, str(setup.workdir()))
        assert per_model.one_shot(result, case, request) == per_model.one_shot(
            per_cls, case, request
        )
    # A second start reads the parser the first wrote.
    _, line, said = started(
        lambda: serve(setup.corpus_model(slug), name), slug, capfd, again=True
    )
    assert said == "reviewed", line
    assert sys.modules[f"{plugin_file(name).stem}_format"].SOURCE == embedded


# --- an invented template ----------------------------------------------------------------


def test_an_invented_template_is_analysed_and_served(env, capfd):
    model = setup.model_folder("muse_invoke", setup.INVENTED.read_text(encoding="utf-8"),
                               *setup.INVENTED_TOKENS)
    result, line, said = started(lambda: serve(model, "auto-invented"), "muse_invoke", capfd)
    assert said in ("analysed", "cached"), line
    assert "--bos-token '<s>' --eos-token '<|end-of-reply|>'" in line  # the tokenizer's
    cls = result
    stem = plugin_file("auto-invented").stem
    # The plugin reads the module the start-up loaded: it is compiled once.
    assert sys.modules[stem].fmt is sys.modules[f"{stem}_format"]
    failures = []
    for text, message in setup.invented_cases():
        case = rt.Case("muse_invoke", rt.TOOL_KINDS[0], text, "", "", message, [setup.WEATHER])
        request = per_model.request_for(case)
        want = setup.as_sent(message)
        got = [per_model.one_shot(cls, case, request)]
        got += [per_model.streamed(cls, case, request, chunks) for chunks in splits(text)]
        failures += [(text, sent) for sent in got if not setup.same_message(sent, want)]
    assert not failures, failures[:3]


def test_the_servers_chat_template_flag_is_the_template_served(env, capfd, tmp_path):
    """`--chat-template FILE` replaces the tokenizer's template (here one the plugin
    would refuse) for vLLM, and so for the plugin."""
    model = setup.model_folder("plain-tokenizer", setup.PLAIN)
    flags = ("--chat-template", str(setup.INVENTED))
    result, line, said = started(lambda: serve(model, "auto-flag", *flags), "flag", capfd)
    assert said in ("analysed", "cached"), line
    assert result.reasoning_parser_cls.__name__ == "FormatReasoningParser"


@pytest.mark.parametrize(
    "kind, template, why",
    [("plain", setup.PLAIN, "neither tool calls nor reasoning"),
     ("broken", setup.BROKEN, "the analysis of the chat template")],
    ids=["plain", "broken"],
)
def test_a_template_with_nothing_to_read_stops_the_server(env, capfd, kind, template, why):
    model = setup.model_folder(f"refused-{kind}", template)
    name = f"refused-{kind}"
    result, line, _ = started(lambda: serve(model, name), "refused", capfd)
    assert_refused(result, line, name, why)


def test_the_auto_plugin_imports_the_standard_library_and_vllm():
    tree = per_model.ast.parse(plugin_vllm.auto_text("chatfmt"))
    outside = {n for n in per_model._imports(tree) - per_model.PLUGIN_IMPORTS
               if not n.startswith("vllm.")}
    assert not outside, outside


def test_zz_figures():
    print("\n" + setup.figures("vllm"))
