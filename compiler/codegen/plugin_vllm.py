"""model.Format (+ its generated module) → one vLLM plugin file.

The plugin is ``plugin_vllm_template.py`` with its ``# filled in`` lines given this
format's values. The generated module goes into the plugin as a string, executed into
a module of its own when vLLM imports the plugin: vLLM imports a plugin by file path
(``--tool-parser-plugin FILE``), under the file's name, with nothing added to
``sys.path``, so a sibling module file could not be imported by name; one file is also
one thing to copy to a server. The string is the module verbatim, so what runs is
byte for byte the module the project tests.
"""

from __future__ import annotations

import re
from pathlib import Path

from .. import model

TEMPLATE = Path(__file__).with_name("plugin_vllm_template.py")

# A name vLLM's parser flags take: no spaces or quotes.
_NAME = re.compile(r"[A-Za-z0-9_.\-]+")


def _literal(text: str) -> str:
    """``text`` as a Python string literal that reads as the text where it can: a raw
    triple-quoted string, else (it holds the quotes, or ends in a backslash) repr."""
    if "'''" not in text and not text.endswith("\\") and "\r" not in text:
        return "r'''" + text + "'''"
    return repr(text)


def _fill(template: str, assignment: str, value: str) -> str:
    """The template with the one line that starts with ``assignment`` and is marked
    ``# filled in`` given ``value``."""
    pattern = re.compile(r"^" + re.escape(assignment) + r" = .*# filled in.*$", re.M)
    found = pattern.findall(template)
    if len(found) != 1:
        raise RuntimeError(f"plugin template: no single line to fill for {assignment}")
    return pattern.sub(lambda _: f"{assignment} = {value}", template, count=1)


def _docstring(fmt: model.Format, name: str, how_it_reads: str) -> str:
    lines = [
        f"vLLM tool-call and reasoning parsers for {fmt.slug}, registered as {name!r}.",
        "",
        "Written by `python -m compiler plugin vllm`; do not edit (rebuild it from the",
        "spec). It imports the standard library and vLLM only.",
        "",
        *fmt.describe(),
        "",
        "Serve with:",
        "",
        "    vllm serve MODEL \\",
        f"        --tool-parser-plugin THIS_FILE --enable-auto-tool-choice "
        f"--tool-call-parser {name} \\",
        f"        --reasoning-parser-plugin THIS_FILE --reasoning-parser {name}",
        "",
        how_it_reads.strip(),
    ]
    text = "\n".join(lines).replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    return '"""' + text + '\n"""\n'


def text(fmt: model.Format, module_source: str, name: str) -> str:
    """The plugin file for ``fmt``, whose generated module is ``module_source``,
    registered with vLLM under ``name``."""
    if not _NAME.fullmatch(name):
        raise ValueError(f"plugin name {name!r}: use letters, digits, '_', '-' or '.'")
    template = TEMPLATE.read_text(encoding="utf-8")
    # The template's docstring says what the template is; the plugin's says what
    # the plugin is, keeping the template's account of how it reads.
    end = template.index('"""', 3) + 3
    how_it_reads = template[: end - 3].split("How it reads:", 1)[1]
    body = template[end:].lstrip("\n")
    reasoning = fmt.reasoning
    starts = reasoning.starts if reasoning.has_block else ()
    closer = reasoning.end if reasoning.has_block else ""
    body = _fill(body, "NAME", repr(name))
    body = _fill(body, "REASONING_STARTS: tuple[str, ...]", repr(tuple(starts)))
    body = _fill(body, "REASONING_END", repr(closer))
    body = _fill(body, "MODULE_SOURCE", _literal(module_source))
    return _docstring(fmt, name, "How it reads:" + how_it_reads) + "\n" + body
