"""model.Format (+ its generated module) → one SGLang plugin file.

The plugin is ``plugin_sglang_template.py`` with its ``# filled in`` lines given this
format's values. The generated module goes into the plugin as a string, executed into
a module of its own when the plugin is imported: one file to copy to a server, run
as the launcher or imported by one, with no sibling to find on ``sys.path``. The
string is the module verbatim, so what runs is byte for byte the module the project
tests.
"""

from __future__ import annotations

import re
from pathlib import Path

from .. import model

TEMPLATE = Path(__file__).with_name("plugin_sglang_template.py")

# A name SGLang's parser flags take: no spaces or quotes.
_NAME = re.compile(r"[A-Za-z0-9_.\-]+")


def _literal(text: str) -> str:
    """``text`` as a Python string literal that reads as the text where it can: a raw
    triple-quoted string, else (it holds the quotes, a carriage return, or ends in a
    backslash) repr."""
    if "'''" not in text and not text.endswith("\\") and "\r" not in text:
        return "r'''" + text + "'''"
    return repr(text)


def _fill(template: str, assignment: str, value: str) -> str:
    """The template with the one line that starts with ``assignment`` and is marked
    ``# filled in`` given ``value``."""
    pattern = re.compile(r"^" + re.escape(assignment) + r" = .*# filled in.*$", re.M)
    if len(pattern.findall(template)) != 1:
        raise RuntimeError(f"plugin template: no single line to fill for {assignment}")
    return pattern.sub(lambda _: f"{assignment} = {value}", template, count=1)


def _docstring(fmt: model.Format, name: str, has_calls: bool, how: str) -> str:
    flags = []
    if has_calls:
        flags.append(f"--tool-call-parser {name}")
    if fmt.reasoning.has_block:
        flags.append(f"--reasoning-parser {name}")
    lines = [
        f"SGLang detectors for {fmt.slug}, registered as {name!r}.",
        "",
        "Written by `python -m compiler plugin sglang`; do not edit (rebuild it from",
        "the spec). It imports the standard library and SGLang only.",
        "",
        *fmt.describe(),
        "",
        "Serve with (this file is the launcher; `serve` takes `sglang serve`'s flags):",
        "",
        "    python THIS_FILE serve --model-path MODEL " + " ".join(flags),
        "",
        how.strip(),
    ]
    text = "\n".join(lines).replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    return '"""' + text + '\n"""\n'


def text(fmt: model.Format, module_source: str, name: str) -> str:
    """The plugin file for ``fmt``, whose generated module is ``module_source``,
    registered with SGLang under ``name``."""
    if not _NAME.fullmatch(name):
        raise ValueError(f"plugin name {name!r}: use letters, digits, '_', '-' or '.'")
    has_calls = fmt.calls is not None
    reasoning = fmt.reasoning
    if not has_calls and not reasoning.has_block:
        raise ValueError(
            f"{fmt.slug}: the format has neither tool calls nor reasoning; "
            "SGLang needs no detector for it"
        )
    template = TEMPLATE.read_text(encoding="utf-8")
    # The template's docstring says what the template is; the plugin's says what
    # the plugin is, keeping the template's account of how it reads.
    end = template.index('"""', 3) + 3
    how = template[: end - 3].split("How it reads:", 1)[1]
    body = template[end:].lstrip("\n")
    starts = reasoning.starts if reasoning.has_block else ()
    body = _fill(body, "NAME", repr(name))
    body = _fill(body, "REASONING_START", repr(starts[0] if starts else ""))
    body = _fill(body, "REASONING_END", repr(reasoning.end if reasoning.has_block else ""))
    body = _fill(body, "HAS_CALLS", repr(has_calls))
    body = _fill(body, "MODULE_SOURCE", _literal(module_source))
    return _docstring(fmt, name, has_calls, "How it reads:" + how) + "\n" + body
