"""What an auto plugin asks the compiler when its server starts: which compiler this is
(its fingerprint, a cache key) and which reviewed spec, if any, is the served template's.

The start-up (compiler/codegen/auto_start.py) runs in the server's environment on the
standard library alone; it runs this as ``CHATFMT_PYTHON -m compiler.codegen.auto_lookup
--template-sha256 DIGEST [--specs DIR]``, in the compiler's own environment, where a spec
is read as every command reads it: as YAML, within ``compiler.spec.load``'s bounds.
The answer is one line of JSON on stdout (exit 0), refusal included; any other outcome
means the interpreter has no usable compiler.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import importlib.metadata
import json
import os
import re
import sys
from pathlib import Path

from .. import __version__, spec as specs

# The compiler's own files: the package this module is part of.
PACKAGE = Path(__file__).resolve().parent.parent
# The distributions whose versions shape what the compiler makes of a template: the
# renders (jinja2), the spec's bytes (PyYAML), the module's (black), the validation.
SHAPING = ("jinja2", "pyyaml", "black", "jsonschema")
_SHA256 = re.compile(r"[0-9a-f]{64}")
# The answer's mark: an interpreter that prints other JSON runs some other program.
ANSWER = "chatfmt auto lookup"


class LookupFailed(Exception):
    """The reviewed specs cannot be searched; the message says why, in one line."""


@functools.cache
def fingerprint() -> str:
    """A hash of everything that shapes what this compiler makes of a template: every
    file of its package (bytecode caches aside: running the compiler writes them), the
    schema, the versions of the distributions in SHAPING and Python's. An upgrade
    changes it whatever the version string says; so does an edit to a checkout."""
    digest = hashlib.sha256()

    def add(name: str, data: bytes) -> None:
        digest.update(f"{name}\0{len(data)}\0".encode("utf-8"))
        digest.update(data)

    for path in sorted(_package_files(PACKAGE)):
        add(path.relative_to(PACKAGE).as_posix(), path.read_bytes())
    if specs.SCHEMA_PATH.is_file():
        add("<schema>", specs.SCHEMA_PATH.read_bytes())
    for name in SHAPING:
        try:
            version = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            version = "(none)"
        add(f"<{name}>", version.encode("utf-8"))
    add("<python>", "{}.{}".format(*sys.version_info[:2]).encode("utf-8"))
    return digest.hexdigest()


def _package_files(folder: Path) -> list[Path]:
    found = []
    for top, folders, names in os.walk(folder):
        folders[:] = [name for name in folders if name != "__pycache__"]
        found += [Path(top, name) for name in names if not name.endswith((".pyc", ".pyo"))]
    return found


def reviewed_spec(folder: str, digest: str) -> str | None:
    """The first ``*.yaml`` in ``folder`` (by name) whose ``template.sha256`` is
    ``digest``, each read as YAML; None where none is.

    LookupFailed, naming the file, where one does not load or records no template
    hash: it may be the served template's spec, and serving the unreviewed analysis
    instead would drop its reviewer's overrides without a word."""
    try:
        names = sorted(os.listdir(folder))
    except OSError as error:
        raise LookupFailed(
            f"cannot read the reviewed specs folder {folder}: {error.strerror or error}"
        ) from None
    for name in names:
        path = os.path.join(folder, name)
        if not name.endswith(".yaml") or not os.path.isfile(path):
            continue
        if _recorded_sha256(path) == digest:
            return path
    return None


def _recorded_sha256(path: str) -> str:
    try:
        spec = specs.load(path)
    except specs.SpecError as error:
        raise LookupFailed(f"a file in the reviewed specs folder does not load: {error}") from None
    template = spec.get("template")
    recorded = template.get("sha256") if isinstance(template, dict) else None
    if not isinstance(recorded, str) or not _SHA256.fullmatch(recorded):
        raise LookupFailed(
            f"{path}: template.sha256: the reviewed specs folder holds a file that records "
            "no template hash (64 hexadecimal digits): no spec, or a damaged one"
        )
    return recorded


def answer(digest: str, folder: str | None) -> dict:
    """What the start-up is told: this compiler, and the reviewed spec for the template
    ``digest`` in ``folder`` (or why there is no telling)."""
    said: dict = {"answer": ANSWER, "version": __version__, "fingerprint": fingerprint()}
    try:
        said["reviewed"] = reviewed_spec(folder, digest) if folder is not None else None
    except LookupFailed as error:
        said["refused"] = str(error)
    return said


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m compiler.codegen.auto_lookup")
    parser.add_argument("--template-sha256", required=True, help="the served template's")
    parser.add_argument("--specs", help="the folder of reviewed specs (default: none)")
    args = parser.parse_args(argv)
    print(json.dumps(answer(args.template_sha256, args.specs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
