"""The generated modules of an earlier commit, loaded from git beside today's: for the
benchmark's side-by-side figures and for ``compare`` (same outputs, text by text).

The commit is ``BASELINE`` unless given: the last commit before the runtime became one
shared module (issue 23), whose modules are standalone files, so each one's text is
executed into a module of its own.

    python -m tests.benchmarks.baseline [--commit C] [--only SLUG ...]

compares every module's outputs with the baseline's on the round-trip texts (every
case kind of tests/roundtrip.py, the texts cut short at a few places, and a text that
fits no format): ``parse`` lenient and strict, the stream at 3-character chunks, the
grammars, the Lark grammar and the structural tag for three ``tool_choice`` settings.
It prints one line per difference and exits 1 when there is any.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import os
import subprocess
import sys
import types

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BASELINE = "ac178fd"


@functools.cache
def load(slug: str, commit: str = BASELINE) -> types.ModuleType:
    """``generated/<slug>.py`` as it was at ``commit`` (a standalone module there)."""
    path = f"generated/{slug}.py"
    shown = subprocess.run(
        ["git", "show", f"{commit}:{path}"], cwd=ROOT, capture_output=True, check=False
    )
    if shown.returncode:
        raise LookupError(f"git show {commit}:{path}: {shown.stderr.decode().strip()}")
    module = types.ModuleType(f"baseline_{slug}")
    exec(compile(shown.stdout.decode("utf-8"), f"{commit}:{path}", "exec"), module.__dict__)
    return module


def _texts(slug: str) -> list[tuple[str, list | None, bool]]:
    """(text, tools, enable_thinking) to compare on."""
    from tests import roundtrip as rt

    texts = []
    for kind in rt.ALL_KINDS:
        case = rt.make_case(slug, kind)
        if case is None:
            continue
        thinking = case.kind.enable_thinking
        texts.append((case.text, case.tools, thinking))
        for cut in (len(case.text) // 3, len(case.text) * 2 // 3, len(case.text) - 1):
            texts.append((case.text[:cut], case.tools, thinking))
    texts.append(('{"a": [1, 2}\n<<< not a format >>>', None, True))
    return texts


def _parse(module, *, text: str, tools, thinking: bool, strict: bool) -> dict:
    return module.parse(text, tools=tools, enable_thinking=thinking, strict=strict)


def _stream(module, *, text: str, tools, thinking: bool) -> list:
    parser = module.StreamParser(tools=tools, enable_thinking=thinking)
    deltas = []
    for at in range(0, len(text), 3):
        deltas.extend(parser.feed(text[at : at + 3]))
    deltas.extend(parser.finish())
    return [deltas, list(parser.abandoned)]


def _outcome(call):
    try:
        return ["ok", call()]
    except ValueError as error:
        return ["ValueError", str(error)]


def _tools(texts) -> list | None:
    return next((tools for _, tools, _ in texts if tools), None)


def compare(slug: str, commit: str = BASELINE) -> tuple[int, list[str]]:
    """(how many outputs of ``generated.<slug>`` were compared with ``commit``'s, one
    line per output that differs)."""
    new = importlib.import_module(f"generated.{slug}")
    old = load(slug, commit)
    texts = _texts(slug)
    differences = []
    compared = 0

    def same(what: str, call) -> None:
        nonlocal compared
        compared += 1
        left, right = _outcome(lambda: call(old)), _outcome(lambda: call(new))
        if json.dumps(left, sort_keys=True, default=repr) != json.dumps(
            right, sort_keys=True, default=repr
        ):
            differences.append(f"{slug}: {what}: {str(left)[:160]} != {str(right)[:160]}")

    for number, (text, given, thinking) in enumerate(texts):
        for strict in (False, True):
            same(
                f"text {number} parse strict={strict}",
                functools.partial(
                    _parse, text=text, tools=given, thinking=thinking, strict=strict
                ),
            )
        same(
            f"text {number} stream",
            functools.partial(_stream, text=text, tools=given, thinking=thinking),
        )
    tools = _tools(texts)
    names = [tool["function"]["name"] for tool in tools or ()]
    choices = ["auto", "required"] + (
        [{"type": "function", "function": {"name": names[0]}}] if names else []
    )
    for choice in choices:
        for thinking in (True, False):
            same(
                f"grammar {choice} thinking={thinking}",
                lambda m, c=choice, th=thinking: m.grammar(
                    tools=tools, tool_choice=c, enable_thinking=th
                ),
            )
        same(
            f"tool_call_grammar {choice}",
            lambda m, c=choice: m.tool_call_grammar(tools=tools, tool_choice=c),
        )
        same(
            f"lark_grammar {choice}",
            lambda m, c=choice: m.lark_grammar(tools=tools, tool_choice=c),
        )
        same(
            f"structural_tag {choice}",
            lambda m, c=choice: m.structural_tag(tools or [], tool_choice=c),
        )
    for name in ("GBNF", "GBNF_TOOLS", "TRIGGERS", "PRESERVED_TOKENS", "STOP", "SPEC"):
        same(name, lambda m, n=name: getattr(m, n))
    return compared, differences


def main(argv=None) -> int:
    from tests import roundtrip as rt

    parser = argparse.ArgumentParser(prog="python -m tests.benchmarks.baseline")
    parser.add_argument("--commit", default=BASELINE)
    parser.add_argument("--only", nargs="*", metavar="SLUG")
    args = parser.parse_args(argv)
    slugs = args.only or rt.slugs()
    differences: list[str] = []
    outputs = 0
    for slug in slugs:
        compared, found = compare(slug, args.commit)
        outputs += compared
        differences.extend(found)
        for line in found:
            print(line)
    print(
        f"{len(slugs)} modules, {outputs} outputs compared with {args.commit}: "
        f"{len(differences)} differences"
    )
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())
