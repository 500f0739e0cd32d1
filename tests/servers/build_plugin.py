"""Build a server plugin file from a spec, as the tests use it.

``python -m tests.servers.build_plugin sglang specs/<slug>.yaml -o FILE [--name N]``
writes what ``python -m compiler plugin sglang`` writes: the spec's standalone module
(``python -m compiler export standalone``) in the server's plugin template.
"""

from __future__ import annotations

import argparse
import importlib
import os
from pathlib import Path

from compiler import model
from compiler import spec as specs
from compiler.codegen.module import standalone

_STANDALONE: dict[str, str] = {}


def standalone_text(fmt: model.Format) -> str:
    """The format's standalone module (made once per format: it is formatted by black)."""
    if fmt.slug not in _STANDALONE:
        _STANDALONE[fmt.slug] = standalone(fmt)
    return _STANDALONE[fmt.slug]

ROOT = Path(__file__).resolve().parents[2]


def plugin_text(server: str, spec_path: str | os.PathLike, name: str | None = None) -> str:
    """The plugin file for the spec at ``spec_path``, registered as ``name`` (the
    spec's slug by default)."""
    spec_path = Path(spec_path)
    slug = spec_path.stem
    fmt = model.build(specs.load(spec_path), slug=slug, origin=str(spec_path))
    source = standalone_text(fmt)
    emitter = importlib.import_module(f"compiler.codegen.plugin_{server}")
    return emitter.text(fmt, source, name or slug)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.servers.build_plugin")
    parser.add_argument("server", choices=["sglang", "vllm"])
    parser.add_argument("spec")
    parser.add_argument("-o", "--output", required=True)
    parser.add_argument("--name")
    args = parser.parse_args(argv)
    Path(args.output).write_text(plugin_text(args.server, args.spec, args.name), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
