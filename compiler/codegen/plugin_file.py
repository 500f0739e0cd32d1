"""What the server plugin emitters (plugin_vllm.py, plugin_sglang.py) share: each
plugin is its server's template (``plugin_<server>_template.py``) with the lines marked
``# filled in`` given one format's values, the generated module among them as a
string literal, under a docstring of its own.

The templates stay apart: each is a standalone file for its server, importing the
standard library and the server only, so nothing of the compiler can be shared into
them.
"""

from __future__ import annotations

import re
from pathlib import Path

# A name the servers' parser flags take: no spaces or quotes.
_NAME = re.compile(r"[A-Za-z0-9_.\-]+")


def check_name(name: str) -> None:
    """Refuse (ValueError) a name a server's command line could not pass."""
    if not _NAME.fullmatch(name):
        raise ValueError(f"plugin name {name!r}: use letters, digits, '_', '-' or '.'")


def literal(text: str) -> str:
    """``text`` as a Python string literal that reads as the text where it can: a raw
    triple-quoted string, else (it holds the quotes, a carriage return, or ends in a
    backslash) repr."""
    if "'''" not in text and not text.endswith("\\") and "\r" not in text:
        return "r'''" + text + "'''"
    return repr(text)


def fill(template: str, assignment: str, value: str) -> str:
    """The template with the one line that starts with ``assignment`` and is marked
    ``# filled in`` given ``value``."""
    pattern = re.compile(r"^" + re.escape(assignment) + r" = .*# filled in.*$", re.M)
    if len(pattern.findall(template)) != 1:
        raise RuntimeError(f"plugin template: no single line to fill for {assignment}")
    return pattern.sub(lambda _: f"{assignment} = {value}", template, count=1)


def read_template(path: Path) -> tuple[str, str]:
    """The template at ``path`` as (its docstring's account of how the plugin reads,
    from "How it reads:" on; the code after the docstring). The template's docstring
    says what the template is; a plugin's says what the plugin is, keeping that
    account."""
    template = path.read_text(encoding="utf-8")
    end = template.index('"""', 3) + 3
    how_it_reads = "How it reads:" + template[: end - 3].split("How it reads:", 1)[1]
    return how_it_reads, template[end:].lstrip("\n")


def docstring(lines: list[str]) -> str:
    """``lines`` as the plugin's module docstring (escaped so that any text reads as
    itself), with its line end."""
    text = "\n".join(lines).replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    return '"""' + text + '\n"""\n'
