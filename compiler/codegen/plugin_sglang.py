"""model.Format (+ its standalone module) → one SGLang plugin file.

The plugin is ``plugin_sglang_template.py`` with its ``# filled in`` lines given this
format's values. The format's standalone module (``chatfmt export
standalone``: the format and the runtime in one) goes into the plugin as a string,
executed into
a module of its own when the plugin is imported: one file to copy to a server, run
as the launcher or imported by one, with no sibling to find on ``sys.path``. The
string is the module verbatim, so what runs is byte for byte the standalone module the
project tests.
"""

from __future__ import annotations

from pathlib import Path

from .. import model
from .plugin_file import (
    auto_body,
    check_name,
    docstring,
    fill,
    how_it_starts,
    literal,
    read_template,
)

TEMPLATE = Path(__file__).with_name("plugin_sglang_template.py")


def _docstring(fmt: model.Format, name: str, has_calls: bool, how_it_reads: str) -> str:
    flags = []
    if has_calls:
        flags.append(f"--tool-call-parser {name}")
    if fmt.reasoning.has_block:
        flags.append(f"--reasoning-parser {name}")
    return docstring(
        [
            f"SGLang detectors for {fmt.slug}, registered as {name!r}.",
            "",
            "Written by `chatfmt plugin sglang`; do not edit (rebuild it from",
            "the spec). It imports the standard library and SGLang only.",
            "",
            *fmt.describe(),
            "",
            "Serve with (this file is the launcher; `serve` takes `sglang serve`'s flags):",
            "",
            "    python THIS_FILE serve --model-path MODEL " + " ".join(flags),
            "",
            how_it_reads.strip(),
        ]
    )


def text(fmt: model.Format, module_source: str, name: str) -> str:
    """The plugin file for ``fmt``, whose standalone module is ``module_source``,
    registered with SGLang under ``name``."""
    check_name(name)
    has_calls = fmt.calls is not None
    reasoning = fmt.reasoning
    if not has_calls and not reasoning.has_block:
        raise ValueError(
            f"{fmt.slug}: the format has neither tool calls nor reasoning; "
            "SGLang needs no detector for it"
        )
    how_it_reads, body = read_template(TEMPLATE)
    starts = reasoning.starts if reasoning.has_block else ()
    body = fill(body, "NAME", repr(name))
    body = fill(body, "REASONING_START", repr(starts[0] if starts else ""))
    body = fill(body, "REASONING_END", repr(reasoning.end if reasoning.has_block else ""))
    body = fill(body, "HAS_CALLS", repr(has_calls))
    body = fill(body, "MODULE_SOURCE", literal(module_source))
    return _docstring(fmt, name, has_calls, how_it_reads) + "\n" + body


def auto_text(name: str, specs: str | None = None, cache: str | None = None) -> str:
    """The launcher for every model, registering SGLang detectors under ``name``: at
    start-up it finds the served model's spec (reviewed in ``specs``, cached in
    ``cache``, or analysed) and then reads as ``text``'s plugin of that spec does."""
    check_name(name)
    how_it_reads, body = read_template(TEMPLATE)
    body = fill(body, "NAME", repr(name))
    body = auto_body(
        body,
        "sglang",
        specs,
        cache,
        {
            "REASONING_START": "(_STARTED.reasoning_starts or ('',))[0]",
            "REASONING_END": "_STARTED.reasoning_end",
            "HAS_CALLS": "_STARTED.has_calls",
            "MODULE_SOURCE": "_STARTED.source",
        },
    )
    head = docstring(
        [
            f"SGLang detectors for the model SGLang serves, whichever it is, registered as "
            f"{name!r}.",
            "",
            "Written by `chatfmt plugin sglang --auto`; do not edit (write it",
            "again). It imports the standard library and SGLang; at start-up it runs the",
            "compiler (chatfmt, installed in the server's environment) in a subprocess.",
            "",
            "Serve with (this file is the launcher; `serve` takes `sglang serve`'s flags):",
            "",
            f"    python THIS_FILE serve --model-path MODEL --tool-call-parser {name} "
            f"--reasoning-parser {name}",
            "",
            "(the flag of a part the served format lacks is taken out before SGLang reads",
            "it, so the one command serves every model).",
            "",
            how_it_starts(),
            "",
            "From there it reads as the plugin `chatfmt plugin sglang SPEC`",
            "writes for that spec does.",
            "",
            how_it_reads.strip(),
        ]
    )
    return head + "\n" + body
