"""`make bench`: how long a full rebuild of the corpus takes.

Runs ``python -m compiler build`` on every template in ``templates/`` in a subprocess (a
fresh interpreter, as `make specs` runs it), writing into a temporary copy of ``specs/``
(the build reads each spec's reviewed overrides from it, and rewrites it) and an empty
temporary directory for the generated modules, so every template is analyzed and every
module generated and formatted afresh, and nothing in the work tree is touched. Prints the
wall time (``--json``: as JSON); ``--check`` exits 1 when it is over the limit (20 s).
A build that fails, or writes fewer modules than there are templates, exits 1.

Run it with the project's virtualenv (``.venv``: the build needs jinja2 and black).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MAX_SECONDS = 20.0  # acceptance (--check)


def time_build(templates: str, specs: str) -> tuple[float, int, str, int]:
    """(wall seconds, exit status, the build's output, parser modules written) of
    one full rebuild."""
    with tempfile.TemporaryDirectory(prefix="chatfmt-build-") as scratch:
        spec_copy = os.path.join(scratch, "specs")
        generated = os.path.join(scratch, "generated")
        shutil.copytree(specs, spec_copy)
        command = [
            sys.executable,
            "-m",
            "compiler",
            "build",
            "--templates",
            templates,
            "--specs",
            spec_copy,
            "--generated",
            generated,
        ]
        start = time.perf_counter()
        done = subprocess.run(
            command, cwd=ROOT, capture_output=True, text=True, check=False
        )
        seconds = time.perf_counter() - start
        modules = (
            sum(
                1
                for name in os.listdir(generated)
                # format modules: not the package's __init__ or the shared runtime
                if name.endswith(".py") and not name.startswith("_")
            )
            if os.path.isdir(generated)
            else 0
        )
    return seconds, done.returncode, done.stdout + done.stderr, modules


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.benchmarks.time_build",
        description=__doc__.split("\n\n")[0],
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help=f"exit 1 when the build takes over {MAX_SECONDS:g} s",
    )
    parser.add_argument("--json", action="store_true", help="print the figure as JSON")
    parser.add_argument("--templates", default=os.path.join(ROOT, "templates"))
    parser.add_argument("--specs", default=os.path.join(ROOT, "specs"))
    args = parser.parse_args(argv)

    count = sum(1 for name in os.listdir(args.templates) if name.endswith(".jinja"))
    if not args.json:
        print(f"building {count} templates afresh ...", file=sys.stderr)
    seconds, status, output, modules = time_build(args.templates, args.specs)
    if status != 0 or modules != count:
        print(output, end="", file=sys.stderr)
        print(
            f"build failed (exit status {status}, {modules} of {count} modules)"
            f" after {seconds:.1f} s"
        )
        return 1
    met = seconds <= MAX_SECONDS
    if args.json:
        figure = {"templates": count, "modules": modules, "seconds": seconds}
        print(json.dumps({**figure, "wanted": MAX_SECONDS, "met": met}, indent=2))
    else:
        print(
            f"full rebuild of {count} templates ({modules} modules):"
            f" {seconds:.1f} s wall, wanted <= {MAX_SECONDS:g} s:"
            f" {'MET' if met else 'NOT met'}"
        )
    return 1 if args.check and not met else 0


if __name__ == "__main__":
    sys.exit(main())
