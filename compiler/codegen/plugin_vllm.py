"""model.Format (+ its standalone module) → one vLLM plugin file.

The plugin is ``plugin_vllm_template.py`` with its ``# filled in`` lines given this
format's values. The format's standalone module (``chatfmt export
standalone``: the format and the runtime in one) goes into the plugin as a string,
executed into
a module of its own when vLLM imports the plugin: vLLM imports a plugin by file path
(``--tool-parser-plugin FILE``), under the file's name, with nothing added to
``sys.path``, so a sibling module file could not be imported by name; one file is also
one thing to copy to a server. The string is the module verbatim, so what runs is
byte for byte the standalone module the project tests.
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

TEMPLATE = Path(__file__).with_name("plugin_vllm_template.py")


def _serve(name: str) -> list[str]:
    return [
        "Serve with:",
        "",
        "    vllm serve MODEL \\",
        f"        --tool-parser-plugin THIS_FILE --enable-auto-tool-choice "
        f"--tool-call-parser {name} \\",
        f"        --reasoning-parser-plugin THIS_FILE --reasoning-parser {name}",
    ]


def _docstring(fmt: model.Format, name: str, how_it_reads: str) -> str:
    return docstring(
        [
            f"vLLM tool-call and reasoning parsers for {fmt.slug}, registered as {name!r}.",
            "",
            "Written by `chatfmt plugin vllm`; do not edit (rebuild it from the",
            "spec). It imports the standard library and vLLM only.",
            "",
            *fmt.describe(),
            "",
            *_serve(name),
            "",
            how_it_reads.strip(),
        ]
    )


def text(fmt: model.Format, module_source: str, name: str) -> str:
    """The plugin file for ``fmt``, whose standalone module is ``module_source``,
    registered with vLLM under ``name``."""
    check_name(name)
    how_it_reads, body = read_template(TEMPLATE)
    reasoning = fmt.reasoning
    starts = reasoning.starts if reasoning.has_block else ()
    closer = reasoning.end if reasoning.has_block else ""
    body = fill(body, "NAME", repr(name))
    body = fill(body, "REASONING_STARTS: tuple[str, ...]", repr(tuple(starts)))
    body = fill(body, "REASONING_END", repr(closer))
    body = fill(body, "MODULE_SOURCE", literal(module_source))
    return _docstring(fmt, name, how_it_reads) + "\n" + body


def auto_text(name: str, specs: str | None = None, cache: str | None = None) -> str:
    """The plugin file for every model, registered with vLLM under ``name``: at
    start-up it finds the served model's spec (reviewed in ``specs``, cached in
    ``cache``, or analysed) and then reads as ``text``'s plugin of that spec does."""
    check_name(name)
    how_it_reads, body = read_template(TEMPLATE)
    body = fill(body, "NAME", repr(name))
    body = auto_body(
        body,
        "vllm",
        specs,
        cache,
        {
            "REASONING_STARTS: tuple[str, ...]": "_STARTED.reasoning_starts",
            "REASONING_END": "_STARTED.reasoning_end",
            "MODULE_SOURCE": "_STARTED.source",
        },
    )
    head = docstring(
        [
            f"vLLM tool-call and reasoning parsers for the model vLLM serves, whichever it "
            f"is, registered as {name!r}.",
            "",
            "Written by `chatfmt plugin vllm --auto`; do not edit (write it",
            "again). It imports the standard library and vLLM; at start-up it runs the",
            "compiler (chatfmt, installed in the server's environment) in a subprocess.",
            "",
            *_serve(name),
            "",
            how_it_starts(),
            "",
            "From there it reads as the plugin `chatfmt plugin vllm SPEC` writes",
            "for that spec does.",
            "",
            how_it_reads.strip(),
        ]
    )
    return head + "\n" + body
