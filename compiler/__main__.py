"""Command line: ``python -m compiler fetch | build``."""

from __future__ import annotations

import argparse
import sys

from .build import BuildError, build
from .render import RenderError
from .sources import SourceError, discover, fetch_corpus
from .spec import SpecError


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m compiler")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    commands = parser.add_subparsers(dest="command", required=True)

    fetch = commands.add_parser("fetch", help="fetch the pinned template corpus")
    fetch.add_argument("--templates", default="templates")
    fetch.add_argument("--cache", default=".cache/corpus")

    run = commands.add_parser("build", help="analyze templates, write specs and parsers")
    run.add_argument("--templates", default="templates")
    run.add_argument("--source", action="append", default=[], help="model dir or GGUF")
    run.add_argument("--specs", default="specs")
    run.add_argument("--generated", default="generated")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "fetch":
            fetch_corpus(args.templates, args.cache, log=lambda m: print(m, file=sys.stderr))
            return 0
        if args.command == "build":
            sources = discover(args.templates, args.source)
            report = build(
                sources, args.specs, args.generated,
                log=lambda m: print(m, file=sys.stderr),
            )
            for warning in report.warnings:
                print(f"warning: {warning}", file=sys.stderr)
            print(
                f"{report.templates} templates, {len(report.changed)} files changed, "
                f"{len(report.warnings)} warnings"
            )
            return 0
    except (SourceError, SpecError, RenderError, BuildError) as error:
        if args.debug:
            raise
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 2


if __name__ == "__main__":
    sys.exit(main())
