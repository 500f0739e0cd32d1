"""Command line: ``chatfmt fetch | build | check | analyze | parse | explain | export |
plugin`` (the command the package installs; ``python -m compiler`` is the same).

Exit codes: 0 done, 1 the verdict is no (``check`` found drift, ``parse --strict`` met
output that does not fit), 2 bad input (a missing file, a bad spec, a broken template),
141 stdout was closed by its reader (as a shell reports a broken pipe; nothing is said).
Errors are one line on stderr; ``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import shlex
import stat
import sys
import tempfile
from collections.abc import Sequence

from . import __version__, spec as specs
from .loader import load_generated, load_spec
from .sources import SourceError, discover, fetch_corpus, files_read, one_source, slugify
from .spec import SpecError

# The analysis, the build and the code generator (jinja2, black) are imported by the
# commands that use them, so that `parse` of a built spec starts in a fraction of a second.


class UsageError(Exception):
    """An input of the command line itself is unusable (a tools file, stdin)."""


# The most read of an input the command line names: a tools list (OpenAI's API takes
# 128 tools; their schemas come to a megabyte at most) and the model output `parse`
# reads on stdin (a million tokens are some 4 MB of text). Past these it is no such
# input, and reading on (/dev/zero) would only fill the memory.
MAX_TOOLS_BYTES = 8 << 20
MAX_OUTPUT_BYTES = 64 << 20


# Errors that mean "the input is bad"; anything else is a bug in the compiler. The last
# two by module and name: an error of a module no command imported was never raised.
_INPUT_ERRORS = (SourceError, SpecError, UsageError)
_LAZY_INPUT_ERRORS = (("render", "RenderError"), ("build", "BuildError"))


def _is_input_error(error: Exception) -> bool:
    if isinstance(error, _INPUT_ERRORS):
        return True
    for module, name in _LAZY_INPUT_ERRORS:
        kind = getattr(sys.modules.get(f"{__package__}.{module}"), name, None)
        if kind is not None and isinstance(error, kind):
            return True
    return False


def build(*args, **kwargs):
    """compiler.build.build, imported when a build runs."""
    from .build import build as build_all

    return build_all(*args, **kwargs)


def _log(message: str) -> None:
    print(message, file=sys.stderr)


class _ArgumentParser(argparse.ArgumentParser):
    """argparse's parser, saying a usage error in one line as every other error is said
    (argparse prints the usage too); its subcommands' parsers are of this class too."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"error: {self.prog}: {message} (`{self.prog} --help` shows the usage)\n")


def _parser() -> argparse.ArgumentParser:
    # --debug is accepted before or after the subcommand; SUPPRESS keeps a subcommand
    # that was not given it from resetting the top-level flag (so it may be absent).
    debug = _ArgumentParser(add_help=False)
    debug.add_argument(
        "--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks"
    )
    parser = _ArgumentParser(prog="chatfmt", parents=[debug])
    parser.add_argument("--version", action="version", version=f"chatfmt {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    def command(name: str, help: str) -> argparse.ArgumentParser:
        return commands.add_parser(name, help=help, description=help, parents=[debug])

    # Every option's help ends with its default, written out where "%(default)s" would
    # print a Python value ([] or None).
    fetch = command("fetch", "fetch the pinned template corpus")
    fetch.add_argument(
        "--templates",
        default="templates",
        help="directory with manifest.json, where the templates go (default: %(default)s)",
    )
    fetch.add_argument(
        "--cache",
        default=".cache/corpus",
        help="where the downloaded sdist is kept (default: %(default)s)",
    )

    for name, help in (
        ("build", "analyze templates, write specs and parsers (re-applying overrides)"),
        ("check", "say whether specs and generated files still match; renders nothing"),
    ):
        sub = command(name, help)
        sub.add_argument(
            "--templates",
            help="directory of .jinja files (default: templates, or none when --source "
            "is given)",
        )
        sub.add_argument(
            "--source",
            action="append",
            default=[],
            help="a .jinja file, model dir or GGUF; repeat for more (default: none)",
        )
        _token_flags(sub)
        sub.add_argument("--specs", default="specs", help="spec directory (default: %(default)s)")
        sub.add_argument(
            "--generated",
            default="generated",
            help="directory of generated parsers and grammars (default: %(default)s)",
        )
        if name == "build":
            sub.add_argument(
                "--jobs",
                type=int,
                default=os.cpu_count() or 1,
                help="templates built at once, each in a process of its own "
                "(default: the machine's CPUs)",
            )

    for name, help in (
        ("analyze", "write the spec of one template (its analysis, no overrides)"),
        ("explain", "print each analysis decision with the renders it compared"),
    ):
        sub = command(name, help)
        sub.add_argument("source", metavar="SOURCE", help="a .jinja file, model dir or GGUF")
        sub.add_argument(
            "--name",
            help="which named template of a model (default: its own, named 'default')",
        )
        _token_flags(sub)
        if name == "analyze":
            sub.add_argument(
                "-o",
                "--output",
                metavar="FILE",
                help="where to write the spec (default: standard output)",
            )

    parse = command("parse", "parse model output (stdin) with the parser a spec compiles to")
    parse.add_argument("spec", metavar="SPEC_FILE", help="a spec, such as specs/<slug>.yaml")
    parse.add_argument(
        "--generated",
        metavar="DIR",
        help="where the spec's built parser is: used when it is what the spec compiles to, "
        "else the parser is compiled in memory (default: 'generated' beside the spec's "
        "directory)",
    )
    parse.add_argument(
        "--tools", metavar="FILE", help="JSON file with an OpenAI tools list (default: none)"
    )
    _thinking_flags(parse, "parse as with enable_thinking=True", "parse as with enable_thinking=False")
    parse.add_argument(
        "--strict",
        action="store_true",
        help="exit 1 on output that does not fit (default: read it as content)",
    )

    export = command(
        "export",
        "write a spec's parser as one standalone module, or its format in another tool's",
    )
    export.add_argument(
        "kind",
        choices=sorted(_EXPORTS),
        help="standalone: one self-contained module (standard library only); gbnf, "
        "tool-call-gbnf, lark, structural-tag: the grammars the module's functions give; "
        "response-template: transformers' response_template",
    )
    export.add_argument("spec", metavar="SPEC_FILE", help="a spec, such as specs/<slug>.yaml")
    export.add_argument(
        "-o", "--output", metavar="FILE", help="where to write it (default: standard output)"
    )
    export.add_argument(
        "--tools",
        metavar="FILE",
        help="JSON file with an OpenAI tools list, for the grammars (default: none)",
    )
    export.add_argument(
        "--tool-choice",
        default="auto",
        metavar="CHOICE",
        help="auto, none, required, or a function's name, for the grammars "
        "(default: %(default)s)",
    )
    export.add_argument(
        "--no-parallel-tool-calls",
        action="store_true",
        help="at most one call, for the grammars (default: any number)",
    )
    _thinking_flags(
        export,
        "the grammars with enable_thinking=True",
        "the grammars with enable_thinking=False",
    )

    plugin = command("plugin", "write a server's parser plugin for a spec's format")
    plugin.add_argument("server", choices=PLUGIN_SERVERS, help="which server")
    plugin.add_argument(
        "spec",
        nargs="?",
        metavar="SPEC_FILE",
        help="a spec, such as specs/<slug>.yaml (none with --auto)",
    )
    plugin.add_argument("-o", "--output", required=True, metavar="FILE", help="the plugin file")
    plugin.add_argument(
        "--name",
        help=f"the name the server's parser flags take (default: the spec's slug; "
        f"{AUTO_NAME!r} with --auto)",
    )
    plugin.add_argument(
        "--auto",
        action="store_true",
        help="one plugin for every model: when the server starts it finds the served "
        "chat template's spec (reviewed, cached or analysed by the compiler installed "
        "beside the server) (default: the format of SPEC_FILE)",
    )
    plugin.add_argument(
        "--specs",
        metavar="DIR",
        help="with --auto: the folder of reviewed specs it looks in first; the "
        "environment variable CHATFMT_SPECS replaces it (default: none)",
    )
    plugin.add_argument(
        "--cache",
        metavar="DIR",
        help="with --auto: where it keeps the specs it analyses; CHATFMT_CACHE replaces "
        "it (default: $XDG_CACHE_HOME/chatfmt, else ~/.cache/chatfmt)",
    )
    return parser


def _token_flags(sub: argparse.ArgumentParser) -> None:
    for name in ("bos", "eos"):
        sub.add_argument(
            f"--{name}-token",
            metavar="TEXT",
            help=f"the tokenizer's {name} token, for a .jinja file without a "
            "tokenizer_config.json beside it (default: that file's, else none)",
        )


def _tokens(args) -> dict[str, str]:
    """The special tokens given on the command line, by their template names."""
    tokens = {
        name: text
        for name in ("bos_token", "eos_token")
        if (text := getattr(args, name, None)) is not None
    }
    paths = [args.source] if isinstance(args.source, str) else args.source
    if tokens and not any(path.endswith(".jinja") for path in paths):
        raise UsageError(
            "--bos-token and --eos-token are for a .jinja file (a model directory or a "
            "GGUF file gives its own): name one with --source"
        )
    return tokens


def _templates_dir(args) -> str | None:
    """--templates, or its default: `templates`, unless the sources are named instead."""
    if args.templates is not None:
        return args.templates
    return None if args.source else "templates"


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    debug = getattr(args, "debug", False)
    try:
        return _COMMANDS[args.command](args)
    except BrokenPipeError:
        return _reader_gone()
    except Exception as error:
        if debug:
            raise
        if _is_input_error(error):
            _log(f"error: {error}")
        else:  # a bug; say so in one line unless asked for more
            _log(f"error: {type(error).__name__}: {error} (a compiler bug? --debug shows where)")
        return 2


def _reader_gone() -> int:
    """Stop quietly when whoever reads stdout closed it (``parse … | head -c 10``):
    stdout is pointed at /dev/null so that the flush at exit fails no more, and the exit
    status is the one a shell reports for a command a broken pipe ended (128 + SIGPIPE)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (AttributeError, OSError, ValueError):
        pass  # stdout is no file (captured): nothing will flush to a closed pipe
    finally:
        os.close(devnull)
    return 128 + 13


def _fetch(args) -> int:
    _folders(args, "--templates", "--cache")
    fetch_corpus(args.templates, args.cache, log=_log)
    return 0


def _build(args) -> int:
    """Build every template; one that fails is named at the end (its files left as they
    were) and the others are built: exit 2 when any failed. ``--debug`` stops at the
    first failure with its traceback."""
    _folders(args, "--templates", "--specs", "--generated")
    sources = discover(_templates_dir(args), args.source, _tokens(args))
    options = {"keep_going": not getattr(args, "debug", False), "jobs": max(1, args.jobs)}
    budget = getattr(args, "time_budget", None)  # seconds per template, where offered
    if budget is not None:
        options["time_budget"] = budget
    report = build(sources, args.specs, args.generated, log=_log, **options)
    failures = report.failures
    for warning in report.warnings:
        _log(f"warning: {warning}")
    for failure in failures:
        _log(f"error: {failure}")
    changed_specs = sum(path.endswith(".yaml") for path in report.changed)
    failed = f"{len(failures)} failed, " if failures else ""
    print(
        f"{report.templates} templates: {failed}{changed_specs} specs and "
        f"{len(report.changed) - changed_specs} generated files changed, "
        f"{len(report.warnings)} warnings"
    )
    return 2 if failures else 0


def _check(args) -> int:
    from .check import check

    _folders(args, "--templates", "--specs", "--generated")
    templates = _templates_dir(args)
    report = check(args.specs, args.generated, templates, args.source, _tokens(args))
    for warning in report.warnings:
        _log(f"warning: {warning}")
    for problem in report.problems:
        print(problem)
    if report.problems:
        print(f"{len(report.problems)} problems: `{_rebuild(args, templates)}` rebuilds them")
        return 1
    print(f"specs in {args.specs} and parsers in {args.generated} are up to date")
    return 0


def _rebuild(args, templates: str | None) -> str:
    """The command that rebuilds what `check` was asked about."""
    tokens = _tokens(args)
    if (templates, args.source, args.specs, args.generated, tokens) == (
        "templates", [], "specs", "generated", {}
    ):
        return "make specs"  # the repository's own layout
    words = ["chatfmt", "build"]
    if args.templates is not None:
        words += ["--templates", args.templates]
    for source in args.source:
        words += ["--source", source]
    for name, text in tokens.items():
        words += [f"--{name.replace('_', '-')}", text]
    words += ["--specs", args.specs, "--generated", args.generated]
    return shlex.join(words)


def _analyze(args) -> int:
    from .build import spec_for

    if args.output:
        _check_output(args.output, files_read(args.source))
    source = one_source(args.source, args.name, _tokens(args))
    notes: list[str] = []
    spec, warnings = spec_for(source, [], source.path, notes=notes)
    for note in notes:
        _log(note)
    for warning in warnings:
        _log(f"warning: {warning}")
    text = specs.dump(spec, made_by="analyze")
    if args.output:
        _write(args.output, text)
        _log(f"wrote {args.output}: the spec of {source.path}")
    else:
        sys.stdout.write(text)
    return 0


def _folders(args, *flags: str) -> None:
    """UsageError where a flag that names a folder names something else (a file)."""
    for flag in flags:
        path = getattr(args, flag[2:].replace("-", "_"))
        if path is not None and os.path.exists(path) and not os.path.isdir(path):
            raise UsageError(f"{flag} {path} is a file, not a folder")


def _check_output(path: str, inputs: Sequence[str | None]) -> None:
    """UsageError where ``-o`` names a file the command reads, by any path to it (a
    link, another spelling): writing it would replace the input. Checked before the
    work, which may take seconds."""
    for source in inputs:
        if source is not None and _same_file(path, source):
            raise UsageError(
                f"-o {path} is {source}, which this command reads: write the output "
                "elsewhere"
            )


def _same_file(left: str, right: str) -> bool:
    try:
        return os.path.samefile(left, right)
    except OSError:  # one of them is missing: nothing to overwrite
        return False


def _write(path: str, text: str) -> None:
    """Write ``text`` to ``path`` whole, or leave the file as it was: the text goes to a
    new file beside it, which then takes its place in one rename, so a reader of the old
    file never sees it cut short or empty, and a failure (a full disk) loses nothing.
    The file keeps its mode; through a symlink, the file it names is replaced; a file
    that is no regular file (a device, a pipe) is written to as it is."""
    data = text.encode("utf-8")  # before anything is touched
    try:
        try:
            mode: int | None = os.stat(path).st_mode  # through a symlink
        except FileNotFoundError:
            mode = None
        if mode is not None and stat.S_ISDIR(mode):
            raise IsADirectoryError(21, "Is a directory")
        if mode is not None and not stat.S_ISREG(mode):  # /dev/null, /dev/stdout, a pipe
            with open(path, "wb") as handle:
                handle.write(data)
            return
        mode = None if mode is None else stat.S_IMODE(mode)
        _replace(os.path.realpath(path), data, mode)
    except OSError as error:
        raise UsageError(f"cannot write {path}: {error.strerror or error}") from None


def _replace(target: str, data: bytes, mode: int | None) -> None:
    """``data`` written to a temporary file in ``target``'s folder (one file system, so
    the rename is atomic), then renamed over ``target``; removed where anything fails."""
    folder, name = os.path.split(target)
    handle, temporary = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temporary, _new_file_mode() if mode is None else mode)
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise


def _new_file_mode() -> int:
    """The mode ``open`` gives a new file (mkstemp's is private): 0o666 less the umask."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def _explain(args) -> int:
    from .build import analyze_source
    from .explain import explain

    source = one_source(args.source, args.name, _tokens(args))
    analyzed = analyze_source(source)  # with the render inputs the build would use
    if analyzed.note:
        _log(analyzed.note)
    analysis = analyzed.analysis
    print(f"{source.path}: {len(analysis.evidence)} decisions of the analysis.")
    print("A and B are the two renders compared; 'both' is text they share around the")
    print("difference, 'A only' and 'B only' what differs, each line as a Python string.\n")
    sys.stdout.write(explain(analysis.evidence))
    return 0


def _thinking_flags(parser: argparse.ArgumentParser, on: str, off: str) -> None:
    """--thinking and --no-thinking, as a request sets the template's thinking switch;
    neither: as a request that sets none (the template's own default)."""
    group = parser.add_mutually_exclusive_group()
    default = " (default: neither, as a request that gives no switch: the template's own default)"
    group.add_argument("--thinking", dest="thinking", action="store_const", const=True, help=on)
    group.add_argument(
        "--no-thinking", dest="thinking", action="store_const", const=False, help=off + default
    )
    parser.set_defaults(thinking=None)


def _parse(args) -> int:
    _folders(args, "--generated")
    if args.generated is not None and not os.path.isdir(args.generated):
        raise UsageError(f"--generated {args.generated}: no such directory")
    spec = specs.load(args.spec)
    specs.validate(spec, args.spec)
    # Overrides are checked as the build checks them, and one added since the last
    # build is applied: the parser is the one the next build will write.
    spec, pending = specs.resolve(spec, args.spec)
    if pending:
        _log(
            f"warning: {args.spec}: its overrides are not built into the spec yet; "
            "parsing with them applied (a build writes them)"
        )
    tools = _read_tools(args.tools) if args.tools else None
    parse = _parser_module(args.spec, spec, args.generated)["parse"]
    text = _read_stdin()
    try:
        message = parse(text, tools=tools, enable_thinking=args.thinking, strict=args.strict)
    except ValueError as error:  # only with --strict: the output does not fit the format
        _log(f"{args.spec}: the output does not fit the format: {error}")
        return 1
    print(json.dumps(message, ensure_ascii=False, indent=2))
    return 0


def _read_stdin() -> str:
    """Standard input as text: bytes that are not UTF-8 (a token cut inside a character)
    read as U+FFFD, so the output is still parsed and the JSON printed is valid UTF-8.
    UsageError past MAX_OUTPUT_BYTES, read no further."""
    buffer = getattr(sys.stdin, "buffer", None)
    if buffer is None:  # a text stream with no bytes under it (main() called in-process)
        text = sys.stdin.read(MAX_OUTPUT_BYTES + 1)  # characters, here
        if len(text) <= MAX_OUTPUT_BYTES:
            return text
    else:
        data = buffer.read(MAX_OUTPUT_BYTES + 1)
        if len(data) <= MAX_OUTPUT_BYTES:
            return data.decode("utf-8", errors="replace")
    raise UsageError(
        f"standard input is larger than {MAX_OUTPUT_BYTES:,} bytes, the most parse reads"
    )


def _parser_module(spec_path: str, spec: dict, generated_dir: str | None = None) -> dict:
    """The parser a (resolved) spec compiles to, as the namespace of its module: the
    built module in ``generated_dir`` when it is the one, else one compiled in memory."""
    slug = slugify(os.path.splitext(os.path.basename(spec_path))[0])
    if generated_dir is None:  # the layout `make specs` writes: specs/ beside generated/
        generated_dir = os.path.join(
            os.path.dirname(os.path.dirname(os.path.abspath(spec_path))), "generated"
        )
    built = _built_module(os.path.join(generated_dir, f"{slug}.py"), slug, spec)
    if built is not None:
        return built
    # Made in memory: the exports are built (a fraction of a second), where importing
    # the built module takes milliseconds.
    return vars(load_spec(slug, spec, spec_path))


def _built_module(path: str, slug: str, spec: dict) -> dict | None:
    """The namespace of the built module at ``path`` if it is what ``spec`` compiles to.

    Decided without generating: the module records the resolved spec it was generated
    from (``SPEC``), and the spec records the compiler version that built it. A module
    from another version, of another spec (an override or an edit not yet built) or
    that does not load is not used. A change to compiler/runtime/ without a rebuild
    (and without a new version) is what `check` finds.
    """
    if spec.get("compiler_version") != __version__ or not os.path.isfile(path):
        return None
    try:
        module = load_generated(os.path.dirname(os.path.abspath(path)), slug)
    except Exception:  # a damaged or foreign file: the spec's own parser is made instead
        return None
    namespace = vars(module)
    if not specs.same(namespace.get("SPEC"), spec) or not callable(namespace.get("parse")):
        return None
    return namespace


def _format_of(path: str):
    """The typed model of the spec at ``path``, its overrides applied (with a warning
    where a build has not written them into the spec yet)."""
    from . import model

    spec = specs.load(path)
    specs.validate(spec, path)
    spec, pending = specs.resolve(spec, path)
    if pending:
        _log(f"warning: {path}: its overrides are not built into the spec yet; applied")
    slug = slugify(os.path.splitext(os.path.basename(path))[0])
    return model.build(spec, slug=slug, origin=path)


def _export(args) -> int:
    """Write one export of a spec; exit 1, saying why, where the format cannot be
    said in it."""
    if args.output:
        _check_output(args.output, [args.spec, args.tools])
    fmt = _format_of(args.spec)
    try:
        text, why = _EXPORTS[args.kind](fmt, args)
    except ValueError as error:  # a setting the format cannot honour (tool_choice)
        raise UsageError(f"{args.spec}: {error}") from None
    if text is None:
        _log(f"{args.spec}: no {args.kind}: {why}")
        return 1
    if args.output:
        _write(args.output, text)
        _log(f"wrote {args.output}: {args.kind} of {args.spec}")
    else:
        sys.stdout.write(text)
    return 0


def _response_template(fmt, args) -> tuple[str | None, str]:
    from .codegen import response_template

    made = response_template.export(fmt)
    return response_template.as_json(made), str(made.inexpressible)


def _standalone(fmt, args) -> tuple[str | None, str]:
    from .codegen import module as module_codegen

    return module_codegen.standalone(fmt), ""


def _grammar_settings(args) -> dict:
    """The grammar functions' keywords the command line gives."""
    choice = args.tool_choice
    if choice not in ("auto", "none", "required"):
        choice = {"type": "function", "function": {"name": choice}}
    return {
        "tools": _read_tools(args.tools) if args.tools else None,
        "tool_choice": choice,
        "parallel_tool_calls": not args.no_parallel_tool_calls,
    }


def _grammar_export(function: str, thinking: bool = True, as_json: bool = False):
    """An export made by calling one of the module's functions with the settings."""

    def export(fmt, args) -> tuple[str | None, str]:
        from .codegen import module as module_codegen

        parser = module_codegen.load(fmt)
        settings = _grammar_settings(args)
        if thinking:
            settings["enable_thinking"] = args.thinking
        made = getattr(parser, function)(settings.pop("tools"), **settings)
        if made is None:
            return None, "this format writes no tool calls"
        text = json.dumps(made, ensure_ascii=False, indent=2) + "\n" if as_json else made
        return text, ""

    return export


# The servers a plugin is written for; each one's emitter is
# compiler/codegen/plugin_<server>.py, with text(fmt, module_source, name) -> str.
PLUGIN_SERVERS = ("vllm", "sglang")
# The name an auto plugin's parsers are registered under, where --name gives none.
AUTO_NAME = "chatfmt"


def _plugin(args) -> int:
    """Write one server's plugin file for a spec's format (its generated module in it),
    or with --auto for every model (it finds its format when the server starts)."""
    _check_plugin_source(args)
    _folders(args, "--cache")
    _check_output(args.output, [args.spec])
    emitter_name = f"{__package__}.codegen.plugin_{args.server}"
    try:
        emitter = importlib.import_module(emitter_name)
    except ModuleNotFoundError as error:
        if error.name != emitter_name:
            raise
        raise UsageError(
            f"no {args.server} plugin in this version of the compiler ({emitter_name} is missing)"
        ) from None
    # ValueError: a name the server's flags cannot take, or a format the server needs
    # no plugin for (SGLang: neither tool calls nor reasoning).
    try:
        if args.auto:
            name = args.name or AUTO_NAME
            folders = [os.path.abspath(f) if f else None for f in (args.specs, args.cache)]
            text = emitter.auto_text(name, *folders)
            source = "every model"
        else:
            from .codegen import module as module_codegen

            fmt = _format_of(args.spec)
            name = args.name or fmt.slug
            text = emitter.text(fmt, module_codegen.standalone(fmt), name)
            source = args.spec
    except ValueError as error:
        raise UsageError(str(error)) from None
    _write(args.output, text)
    _log(f"wrote {args.output}: {args.server} plugin {name!r} for {source}")
    return 0


def _check_plugin_source(args) -> None:
    """A spec, or --auto (with its folders), never both nor neither."""
    if args.auto and args.spec is not None:
        raise UsageError("give a spec or --auto, not both")
    if not args.auto and args.spec is None:
        raise UsageError("give a spec (SPEC_FILE), or --auto for a plugin for every model")
    if not args.auto and (args.specs or args.cache):
        raise UsageError("--specs and --cache are for --auto")
    if args.specs and not os.path.isdir(args.specs):
        raise UsageError(f"--specs {args.specs} is no folder")


# Each kind of export: (the format model, the command's arguments) → (the text, or
# None and why not).
_EXPORTS = {
    "standalone": _standalone,
    "gbnf": _grammar_export("grammar"),
    "tool-call-gbnf": _grammar_export("tool_call_grammar", thinking=False),
    "lark": _grammar_export("lark_grammar"),
    "structural-tag": _grammar_export("structural_tag", as_json=True),
    "response-template": _response_template,
}


def _read_tools(path: str) -> list:
    """The tools list in the JSON file ``path``: read within MAX_TOOLS_BYTES, JSON as
    the standard has it (no NaN or Infinity), Unicode text throughout."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_TOOLS_BYTES + 1)
        if len(data) > MAX_TOOLS_BYTES:
            raise UsageError(
                f"{path} is larger than {MAX_TOOLS_BYTES:,} bytes, the most read of a "
                "tools file"
            )
        tools = json.loads(data.decode("utf-8"), parse_constant=_no_constant)
    except (OSError, UnicodeDecodeError) as error:
        raise UsageError(f"cannot read {path}: {error}") from None
    except (json.JSONDecodeError, ValueError) as error:
        raise UsageError(f"{path} is not valid JSON: {error}") from None
    if not isinstance(tools, list) or not all(isinstance(tool, dict) for tool in tools):
        raise UsageError(f"{path}: expected a JSON list of tools (objects)")
    where = _not_unicode(tools)
    if where is not None:
        place, text = where
        raise UsageError(
            f"{path}: {place}: {ascii(text)} holds a lone surrogate (a \\ud800-\\udfff "
            "escape with no pair), which is no Unicode text"
        )
    return tools


def _no_constant(name: str):
    raise ValueError(f"{name} is no JSON value")


def _not_unicode(value, path: str = "") -> tuple[str, str] | None:
    """The dotted path (list items by index) and text of the first string, key or
    value, in ``value`` that UTF-8 cannot encode (a lone surrogate); None if none."""
    pending = [(path, value)]
    while pending:
        where, item = pending.pop()
        if isinstance(item, dict):
            for key in item:
                if not key.isascii() and not _encodes(key):
                    return where or "(top level)", key
            pending.extend((f"{where}.{key}" if where else key, v) for key, v in item.items())
        elif isinstance(item, list):
            pending.extend((f"{where}.{i}" if where else str(i), v) for i, v in enumerate(item))
        elif isinstance(item, str) and not item.isascii() and not _encodes(item):
            return where, item
    return None


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


_COMMANDS = {
    "fetch": _fetch,
    "build": _build,
    "check": _check,
    "analyze": _analyze,
    "explain": _explain,
    "parse": _parse,
    "export": _export,
    "plugin": _plugin,
}


if __name__ == "__main__":
    sys.exit(main())
