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


# --------------------------------------------------------------------------- --auto

AUTO_START = Path(__file__).with_name("auto_start.py")
# What an auto plugin runs after its NAME line, before the lines that read the format:
# the start-up, which finds the served model's format and loads its parser module.
_START = '''
# The start-up (compiler/codegen/auto_start.py, verbatim): the format of the model the
# server serves, found when the server imports this file; the lines below read it.
START_SOURCE = {source}
SPECS_DIR = {specs!r}  # reviewed specs, looked in first (CHATFMT_SPECS replaces it)
CACHE_DIR = {cache!r}  # analysed specs (CHATFMT_CACHE replaces it; None: ~/.cache/chatfmt)


def _start():
    name = f"{{__name__}}_start"
    start = types.ModuleType(name, "how the plugin finds its format")
    sys.modules[name] = start  # its classes name their module
    exec(compile(START_SOURCE, f"<{{NAME}}: start-up>", "exec"), start.__dict__)
    return start.start(
        {server!r},
        NAME,
        specs=SPECS_DIR,
        cache=CACHE_DIR,
        module_name=f"{{__name__}}_format",
        label=f"<{{NAME}}: generated parser>",
    )


_STARTED = _start()
'''


def how_it_starts() -> str:
    """auto_start.py's account of the start-up, from "At start-up" on."""
    text = AUTO_START.read_text(encoding="utf-8")
    doc = text[: text.index('"""', 3)]
    return "At start-up" + doc.split("At start-up", 1)[1].rstrip()


def auto_body(
    body: str, server: str, specs: str | None, cache: str | None, fills: dict[str, str]
) -> str:
    """A template's code (its NAME filled in) for an auto plugin: the start-up after
    the NAME line, and each other line to fill given its expression in ``fills``,
    which reads what the start-up found (``_STARTED``, an ``auto_start.Started``)."""
    start = _START.format(
        source=literal(AUTO_START.read_text(encoding="utf-8")),
        specs=specs,
        cache=cache,
        server=server,
    )
    name_line = re.compile(r"^NAME = .*\n", re.M)
    if len(name_line.findall(body)) != 1:
        raise RuntimeError("plugin template: no single NAME line to start after")
    body = name_line.sub(lambda found: found.group(0) + start, body, count=1)
    for assignment, expression in fills.items():
        body = fill(body, assignment, expression)
    if "# filled in" in body:
        left = [line for line in body.splitlines() if "# filled in" in line]
        raise RuntimeError(f"plugin template: lines the auto plugin does not fill: {left}")
    return body
