"""Command line: ``python -m compiler fetch | build | check | analyze | parse | explain``.

Exit codes: 0 done, 1 the verdict is no (``check`` found drift, ``parse --strict`` met
output that does not fit), 2 bad input (a missing file, a bad spec, a broken template).
Errors are one line on stderr; ``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from . import spec as specs
from .analyze import analyze
from .build import BuildError, build, spec_for
from .check import check
from . import model
from .codegen import module as module_codegen
from .explain import explain
from .render import ChatTemplate, RenderError, RenderInputs
from .sources import SourceError, discover, fetch_corpus, one_source, slugify
from .spec import SpecError


class UsageError(Exception):
    """An input of the command line itself is unusable (a tools file, stdin)."""


# Errors that mean "the input is bad"; anything else is a bug in the compiler.
_INPUT_ERRORS = (SourceError, SpecError, RenderError, BuildError, UsageError)


def _log(message: str) -> None:
    print(message, file=sys.stderr)


def _parser() -> argparse.ArgumentParser:
    # --debug is accepted before or after the subcommand; SUPPRESS keeps a subcommand
    # that was not given it from resetting the top-level flag (so it may be absent).
    debug = argparse.ArgumentParser(add_help=False)
    debug.add_argument(
        "--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks"
    )
    parser = argparse.ArgumentParser(prog="python -m compiler", parents=[debug])
    commands = parser.add_subparsers(dest="command", required=True)

    def command(name: str, help: str) -> argparse.ArgumentParser:
        return commands.add_parser(name, help=help, description=help, parents=[debug])

    fetch = command("fetch", "fetch the pinned template corpus")
    fetch.add_argument("--templates", default="templates")
    fetch.add_argument("--cache", default=".cache/corpus")

    for name, help in (
        ("build", "analyze templates, write specs and parsers (re-applying overrides)"),
        ("check", "say whether specs and generated files still match; renders nothing"),
    ):
        sub = command(name, help)
        sub.add_argument("--templates", default="templates", help="directory of .jinja files")
        sub.add_argument(
            "--source", action="append", default=[], help="a .jinja file, model dir or GGUF"
        )
        sub.add_argument("--specs", default="specs")
        sub.add_argument("--generated", default="generated")

    for name, help in (
        ("analyze", "print the spec of one template (no overrides)"),
        ("explain", "print each analysis decision with the renders it compared"),
    ):
        sub = command(name, help)
        sub.add_argument("source", metavar="SOURCE", help="a .jinja file, model dir or GGUF")
        sub.add_argument("--name", help="which named template of a model (default: its own)")

    parse = command("parse", "parse model output (stdin) with the parser a spec compiles to")
    parse.add_argument("spec", metavar="SPEC_FILE")
    parse.add_argument("--tools", metavar="FILE", help="JSON file with an OpenAI tools list")
    parse.add_argument("--no-thinking", action="store_true", help="enable_thinking=False")
    parse.add_argument("--strict", action="store_true", help="exit 1 on output that does not fit")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    debug = getattr(args, "debug", False)
    try:
        return _COMMANDS[args.command](args)
    except _INPUT_ERRORS as error:
        if debug:
            raise
        _log(f"error: {error}")
        return 2
    except Exception as error:  # a bug; say so in one line unless asked for more
        if debug:
            raise
        _log(f"error: {type(error).__name__}: {error} (a compiler bug? --debug shows where)")
        return 2


def _fetch(args) -> int:
    fetch_corpus(args.templates, args.cache, log=_log)
    return 0


def _build(args) -> int:
    sources = discover(args.templates, args.source)
    report = build(sources, args.specs, args.generated, log=_log)
    for warning in report.warnings:
        _log(f"warning: {warning}")
    changed_specs = sum(path.endswith(".yaml") for path in report.changed)
    print(
        f"{report.templates} templates: {changed_specs} specs and "
        f"{len(report.changed) - changed_specs} generated files changed, "
        f"{len(report.warnings)} warnings"
    )
    return 0


def _check(args) -> int:
    report = check(args.specs, args.generated, args.templates, args.source)
    for warning in report.warnings:
        _log(f"warning: {warning}")
    for problem in report.problems:
        print(problem)
    if report.problems:
        print(f"{len(report.problems)} problems: `make specs` rebuilds specs and parsers")
        return 1
    print(f"specs in {args.specs} and parsers in {args.generated} are up to date")
    return 0


def _analyze(args) -> int:
    source = one_source(args.source, args.name)
    spec, warnings = spec_for(source, [], source.path)
    for warning in warnings:
        _log(f"warning: {warning}")
    sys.stdout.write(specs.dump(spec))
    return 0


def _explain(args) -> int:
    source = one_source(args.source, args.name)
    inputs = RenderInputs(source.bos_token, source.eos_token, dict(source.variables))
    analysis = analyze(ChatTemplate(source.source, source.path, inputs), source.tool_shape)
    print(f"{source.path}: {len(analysis.evidence)} decisions of the analysis.")
    print("A and B are the two renders compared; 'both' is text they share around the")
    print("difference, 'A only' and 'B only' what differs, each line as a Python string.\n")
    sys.stdout.write(explain(analysis.evidence))
    return 0


def _parse(args) -> int:
    spec = specs.load(args.spec)
    specs.validate(spec, args.spec)
    tools = _read_tools(args.tools) if args.tools else None
    parser = _parser_module(args.spec, spec)
    text = sys.stdin.read()
    try:
        message = parser["parse"](
            text, tools=tools, enable_thinking=not args.no_thinking, strict=args.strict
        )
    except ValueError as error:  # only with --strict: the output does not fit the format
        _log(f"{args.spec}: the output does not fit the format: {error}")
        return 1
    print(json.dumps(message, ensure_ascii=False, indent=2))
    return 0


def _parser_module(spec_path: str, spec: dict) -> dict:
    """The generated parser of a spec, built in memory: the namespace of its module."""
    slug = slugify(os.path.splitext(os.path.basename(spec_path))[0])
    namespace = {"__name__": f"generated.{slug}"}
    text = module_codegen.generate(model.build(spec, slug=slug, origin=spec_path)).module
    exec(compile(text, f"<parser of {spec_path}>", "exec"), namespace)
    return namespace


def _read_tools(path: str) -> list:
    try:
        with open(path, encoding="utf-8") as handle:
            tools = json.load(handle)
    except (OSError, UnicodeDecodeError) as error:
        raise UsageError(f"cannot read {path}: {error}") from None
    except json.JSONDecodeError as error:
        raise UsageError(f"{path} is not valid JSON: {error}") from None
    if not isinstance(tools, list) or not all(isinstance(tool, dict) for tool in tools):
        raise UsageError(f"{path}: expected a JSON list of tools (objects)")
    return tools


_COMMANDS = {
    "fetch": _fetch,
    "build": _build,
    "check": _check,
    "analyze": _analyze,
    "explain": _explain,
    "parse": _parse,
}


if __name__ == "__main__":
    sys.exit(main())
