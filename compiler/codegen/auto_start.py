"""What a plugin written by ``python -m compiler plugin SERVER --auto`` does when the
server starts: find the format of the model it serves.

This module's text goes into every auto plugin verbatim, run into a module of its
own, so it imports the standard library only; the two functions that ask a server
which model it serves import that server, when they run.

At start-up, once per server (the processes the server starts inherit the result
through an environment variable, ``CHATFMT_STARTED_<NAME>``):

1. The chat template: the file ``CHATFMT_CHAT_TEMPLATE`` names, else the server's own
   ``--chat-template``, else the tokenizer's (the one a request with tools renders, as
   transformers picks it); with the tokenizer's bos and eos tokens.
2. A reviewed spec: the first ``*.yaml`` in the specs folder (``CHATFMT_SPECS``, else
   the one the plugin was written with) whose ``template.sha256`` is the template's,
   each read as YAML by the compiler (compiler/codegen/auto_lookup.py, which also says
   which compiler it is); a file there that does not load, or records no template
   hash, stops the start (it may be this template's).
3. Else the unreviewed spec cached in ``<cache>/<sha256>-<key>/`` (``CHATFMT_CACHE``,
   else the plugin's, else ``$XDG_CACHE_HOME/chatfmt``), where the key is a hash of all
   else the analysis is given (the tokenizer's bos and eos) and of the compiler itself
   (its files and pinned libraries, not its version string); and else the analysis:
   ``python -m compiler analyze`` in a subprocess (its sandbox sets process-wide limits
   and alarms that must not touch the server), its spec written there. Every file is
   written whole or not at all (a temporary file in the same folder, then
   ``os.replace``), so servers that start at once may analyse the same template twice
   but never read half a file.
4. The parser: ``python -m compiler export standalone SPEC``, cached beside the spec.

The compiler runs as ``CHATFMT_PYTHON -m compiler`` (default: the server's own
interpreter). Relative paths in ``CHATFMT_PYTHON``, ``CHATFMT_SPECS`` and
``CHATFMT_CACHE`` are the server's (its working folder); the compiler runs in a folder
of the cache. Where any step fails, or the template writes neither tool calls nor
reasoning, the server does not start: ``SystemExit`` with one line saying why (a
server that silently returned calls as text would be worse).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
import types
from typing import Any, Callable, NamedTuple

# A template or spec larger than this is no chat template (the compiler's own bound
# on a spec file is 1 MiB).
MAX_FILE = 1 << 20
# Seconds the compiler may take for one step: its sandbox gives a template's renders
# 60 s; the rest is importing it and writing the parser.
COMPILER_TIMEOUT = 300
# What the start-up asks the compiler first (compiler/codegen/auto_lookup.py), and the
# mark of its answer.
LOOKUP = "compiler.codegen.auto_lookup"
LOOKUP_ANSWER = "chatfmt auto lookup"
# A cache file's mode: mkstemp makes its file private, and the cache may be shared.
FILE_MODE = 0o644


class Refused(Exception):
    """The server must not start; the message says why, in one line."""


class Template(NamedTuple):
    """The chat template the server renders, and the tokenizer's special tokens."""

    text: str
    bos: str | None
    eos: str | None
    origin: str  # where it came from, for the log


class Compiler(NamedTuple):
    """The compiler an interpreter runs."""

    python: str
    version: str
    fingerprint: str  # of its files and pinned libraries: a cache key


class Resolved(NamedTuple):
    module: str  # the standalone parser module's file
    spec: str  # the spec it was made from
    how: str  # "reviewed", "cached" or "analysed"


class Started(NamedTuple):
    """What the plugin's code reads: the parser's text (its module is loaded already)
    and the values the per-model plugin has filled in."""

    source: str
    reasoning_starts: tuple[str, ...]
    reasoning_end: str
    has_calls: bool


def _log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- files


def sha256(text: str) -> str:
    """The template's sha256 as a spec records it: of its UTF-8 text."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def write_atomically(path: str, text: str) -> None:
    """Write ``text`` to ``path`` whole: another process sees the old file or the new
    one, never a part (the temporary file is in the same folder, so os.replace is one
    rename on one file system)."""
    folder = os.path.dirname(path) or "."
    handle, temporary = tempfile.mkstemp(prefix=".tmp-", dir=folder)
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="") as out:
            out.write(text)
        os.chmod(temporary, FILE_MODE)
        os.replace(temporary, path)
    except BaseException:
        _remove(temporary)
        raise


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _read(path: str, what: str, limit: int | None = MAX_FILE) -> str:
    try:
        if limit is not None and os.path.getsize(path) > limit:
            raise Refused(f"{what} {path} is larger than {limit} bytes")
        with open(path, encoding="utf-8", newline="") as handle:
            return handle.read()
    except (OSError, UnicodeDecodeError) as error:
        raise Refused(f"cannot read {what} {path}: {error}") from None


# --------------------------------------------------------------------------- the compiler


def compiler(python: str, args: list[str], what: str, cwd: str) -> str:
    """``python -m compiler ARGS``'s standard output; Refused, with the compiler's last
    line, where it fails. ``cwd`` is a folder of the cache, so that no folder named
    ``compiler`` where the server runs stands in for the compiler."""
    return _run([python, "-m", "compiler", *args], what, cwd)


def _run(command: list[str], what: str, cwd: str) -> str:
    done = _execute(command, what, cwd)
    if done.returncode != 0:
        raise Refused(f"{what} failed: {_last_line(done)} ({shlex.join(command)})")
    return done.stdout


def _last_line(done: subprocess.CompletedProcess) -> str:
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    return lines[-1].strip() if lines else f"exit status {done.returncode}"


def _execute(command: list[str], what: str, cwd: str) -> subprocess.CompletedProcess:
    python = command[0]
    try:
        return subprocess.run(
            command,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            encoding="utf-8",
            errors="replace",
            timeout=COMPILER_TIMEOUT,
            cwd=cwd,
        )
    except subprocess.TimeoutExpired:
        raise Refused(f"{what} took more than {COMPILER_TIMEOUT} s") from None
    except OSError as error:
        raise Refused(f"{what}: cannot run {python}: {error}") from None


_INSTALL = (
    "install the compiler in the server's environment (pip install chatfmt, or pip "
    "install -e a checkout of it) or name an interpreter that has it in CHATFMT_PYTHON"
)


def ask_compiler(
    python: str, digest: str, specs: str | None, cwd: str
) -> tuple[Compiler, str | None]:
    """The compiler ``python`` runs, and the reviewed spec in ``specs`` whose template
    hash is ``digest`` (None: none there), as the compiler reads the specs (YAML);
    Refused where the interpreter has no usable compiler or a reviewed spec does not
    load."""
    command = [python, "-m", LOOKUP, "--template-sha256", digest]
    if specs is not None:
        command += ["--specs", specs]
    what = "asking the compiler which it is and for a reviewed spec"
    try:
        done = _execute(command, what, cwd)
    except Refused as error:
        raise Refused(f"{error}; {_INSTALL}") from None
    if done.returncode != 0:
        raise Refused(f"{what} failed: {_last_line(done)} ({shlex.join(command)}); {_INSTALL}")
    try:
        said = json.loads(done.stdout)
    except ValueError:
        said = None
    if not isinstance(said, dict) or said.get("answer") != LOOKUP_ANSWER:
        shown = done.stdout.strip()[:200]
        raise Refused(f"{python} -m {LOOKUP} is not chatfmt's compiler (it says {shown!r})")
    if said.get("refused"):
        raise Refused(str(said["refused"]))
    version, fingerprint = said.get("version"), said.get("fingerprint")
    reviewed = said.get("reviewed")
    if not isinstance(version, str) or not re.fullmatch(r"[0-9a-f]{64}", str(fingerprint)):
        raise Refused(f"{python} -m {LOOKUP} answers without its version and fingerprint")
    installed = Compiler(python, version, str(fingerprint))
    return installed, reviewed if isinstance(reviewed, str) else None


def entry_name(template: Template, installed: Compiler) -> str:
    """The cache folder of the ``installed`` compiler's analysis of ``template``: the
    template's hash, then a hash of all else that shapes the spec (every input the
    analysis is given, and the compiler's fingerprint): another eos token, or another
    compiler, makes another entry."""
    given = {
        key: value for key, value in template._asdict().items() if key not in ("text", "origin")
    }
    key = json.dumps({"inputs": given, "compiler": installed.fingerprint}, sort_keys=True)
    return f"{sha256(template.text)}-{sha256(key)[:32]}"


def _token_flags(template: Template) -> list[str]:
    flags = []
    for flag, token in (("--bos-token", template.bos), ("--eos-token", template.eos)):
        if token:
            flags += [flag, token]
    return flags


def _export(python: str, spec: str, module: str) -> None:
    """The spec's standalone parser module, written to ``module`` whole."""
    folder = os.path.dirname(module)
    handle, temporary = tempfile.mkstemp(prefix=".tmp-", suffix=".py", dir=folder)
    os.close(handle)
    try:
        compiler(
            python,
            ["export", "standalone", spec, "-o", temporary],
            f"writing the parser of {spec}",
            folder,
        )
        os.chmod(temporary, FILE_MODE)
        os.replace(temporary, module)
    finally:
        _remove(temporary)


def resolve(
    template: Template,
    *,
    specs: str | None,
    cache: str,
    python: str,
    log: Callable[[str], None] = _log,
) -> Resolved:
    """The parser module for ``template``: from a reviewed spec in ``specs`` whose
    template hash is the template's, else from the spec cached for it, else from a
    fresh analysis (cached). One line of ``log`` says which, and how to review it."""
    # The compiler runs in a folder of the cache: paths it is given must not be the
    # server's relative ones.
    cache, specs = os.path.abspath(cache), os.path.abspath(specs) if specs else None
    python = interpreter(python)
    os.makedirs(cache, exist_ok=True)
    installed, reviewed = ask_compiler(python, sha256(template.text), specs, cache)
    if reviewed is not None:
        module = _reviewed_module(reviewed, os.path.join(cache, "reviewed-"), installed)
        log(f"chatfmt: {template.origin}: serving the reviewed spec {reviewed}")
        return Resolved(module, reviewed, "reviewed")
    entry = os.path.join(cache, entry_name(template, installed))
    os.makedirs(entry, exist_ok=True)
    jinja, spec = os.path.join(entry, "template.jinja"), os.path.join(entry, "spec.yaml")
    took = None if os.path.isfile(spec) else _analyse(template, jinja, spec, installed.python)
    module = os.path.join(entry, "module.py")
    if not os.path.isfile(module):
        _export(installed.python, spec, module)
    explain = shlex.join(["python", "-m", "compiler", "explain", jinja, *_token_flags(template)])
    where = specs or "a folder named by CHATFMT_SPECS"
    review = f"review it with `{explain}` and put the reviewed spec in {where}"
    if took is None:
        log(
            f"chatfmt: {template.origin}: reusing the unreviewed spec {spec}, analysed "
            f"earlier from this template; {review}"
        )
        return Resolved(module, spec, "cached")
    log(
        f"chatfmt: {template.origin}: analysed the chat template in {took:.1f} s; "
        f"serving the unreviewed spec {spec}; {review}"
    )
    return Resolved(module, spec, "analysed")


def _reviewed_module(spec: str, prefix: str, installed: Compiler) -> str:
    """The parser of a reviewed spec, made once per text of the spec (an edit to it
    makes a new one) and compiler (its fingerprint)."""
    digest = sha256(_read(spec, "the spec"))
    entry = f"{prefix}{digest}-{installed.fingerprint[:32]}"
    os.makedirs(entry, exist_ok=True)
    module = os.path.join(entry, "module.py")
    if not os.path.isfile(module):
        _export(installed.python, spec, module)
    return module


def _analyse(template: Template, jinja: str, spec: str, python: str) -> float:
    """Write the template to ``jinja`` and its analysis to ``spec``; the seconds it
    took."""
    began = time.monotonic()
    write_atomically(jinja, template.text)
    analysis = compiler(
        python,
        ["analyze", jinja, *_token_flags(template)],
        f"the analysis of the chat template of {template.origin}",
        os.path.dirname(spec),
    )
    write_atomically(spec, analysis)
    return time.monotonic() - began


# --------------------------------------------------------------------------- the module


def load(path: str, module_name: str, label: str) -> types.ModuleType:
    """The parser module at ``path``, executed into ``sys.modules[module_name]`` with
    its text as ``SOURCE``: the plugin's own loader finds it there and does not run it
    again."""
    source = _read(path, "the parser module", limit=None)  # the compiler wrote it
    loaded = sys.modules.get(module_name)
    if loaded is not None and getattr(loaded, "SOURCE", None) == source:
        return loaded
    module = types.ModuleType(module_name, "the generated parser of the served model")
    sys.modules[module_name] = module
    try:
        exec(compile(source, label, "exec"), module.__dict__)
    except Exception as error:
        del sys.modules[module_name]
        raise Refused(f"the parser module {path} does not load: {error}") from None
    module.SOURCE = source  # type: ignore[attr-defined]
    return module


def started(module: Any, spec: str) -> Started:
    """The values the plugin's code reads, as the per-model plugin's emitter fills
    them in; Refused where the template writes neither tool calls nor reasoning.

    Calls in the compiler's fallback format (``polyfills.fallback_call``, where the
    template has no call format) do not count: the model learns that format only from
    messages its client rewrote with ``prepare_messages``, and the server renders the
    template as it is."""
    has_reasoning = bool(module.HAS_REASONING)
    has_calls = bool(module.HAS_CALLS)
    templates_calls = has_calls and (module.SPEC.get("tools") or {}).get("format") != "none"
    if not templates_calls and not has_reasoning:
        raise Refused(
            f"the spec {spec} finds neither tool calls nor reasoning in the chat template: "
            "nothing for the plugin to read (serve the model without it; where clients "
            "prepare their messages for the compiler's fallback calls, write the plugin "
            "from the spec with `chatfmt plugin`)"
        )
    return Started(
        module.SOURCE,
        tuple(module.REASONING_STARTS) if has_reasoning else (),
        module.REASONING_END if has_reasoning else "",
        has_calls,
    )


# --------------------------------------------------------------------------- the servers


def _tokenizer_template(tokenizer: Any, origin: str, given: str | None) -> Template:
    """The template ``given``, else the one the tokenizer renders a request with tools
    with; with the tokenizer's bos and eos."""
    text = given
    if text is None:
        getter = getattr(tokenizer, "get_chat_template", None)
        try:
            text = getter(tools=[]) if getter else getattr(tokenizer, "chat_template", None)
        except Exception as error:  # transformers: ValueError, no template
            raise Refused(f"{origin}: the tokenizer has no chat template ({error})") from None
    if not isinstance(text, str) or not text.strip():
        raise Refused(f"{origin}: the tokenizer has no chat template")
    tokens = []
    for attribute in ("bos_token", "eos_token"):
        token = getattr(tokenizer, attribute, None)
        tokens.append(token if isinstance(token, str) and token else None)
    return Template(text, tokens[0], tokens[1], origin)


def _vllm_arguments() -> Any:
    """The arguments vLLM parsed, from the frame that imports the plugin: vLLM hands a
    plugin nothing, and imports it in ``init_parser_plugin(args)`` (the API server) or
    ``run_headless(args)`` (an engine without one)."""
    frame = sys._getframe(1)
    while frame is not None:
        args = frame.f_locals.get("args")
        if isinstance(args, argparse.Namespace) and getattr(args, "model", None):
            return args
        frame = frame.f_back  # type: ignore[assignment]
    return None


def vllm_template(given: str | None) -> Template:
    """The template vLLM serves (``given``, else its ``--chat-template``, else the
    tokenizer's), with the tokenizer's tokens."""
    args = _vllm_arguments()
    if args is None:
        if given is not None:
            return Template(given, None, None, "CHATFMT_CHAT_TEMPLATE")
        raise Refused(
            "no vLLM arguments on the stack to tell the served model by; name its chat "
            "template in CHATFMT_CHAT_TEMPLATE"
        )
    from vllm.tokenizers.registry import get_tokenizer

    name = args.tokenizer or args.model
    origin = f"vLLM serving {args.model}"
    if given is None and getattr(args, "chat_template", None):
        from vllm.renderers.chat_utils.chat_template import load_chat_template

        given = load_chat_template(args.chat_template)
    try:
        tokenizer = get_tokenizer(
            name,
            trust_remote_code=bool(getattr(args, "trust_remote_code", False)),
            revision=getattr(args, "tokenizer_revision", None) or getattr(args, "revision", None),
            tokenizer_mode=getattr(args, "tokenizer_mode", "auto") or "auto",
        )
    except Exception as error:
        raise Refused(f"{origin}: cannot load the tokenizer {name}: {error}") from None
    return _tokenizer_template(tokenizer, origin, given)


def _sglang_arguments(argv: list[str]) -> argparse.Namespace:
    """The few of ``sglang serve``'s arguments that say which template it serves, read
    as SGLang reads them (a model path first stands for ``--model-path``); all others
    are left for SGLang, which checks them after the plugin has registered."""
    words = argv[1:]
    if words[:1] == ["serve"]:
        words = words[1:]
    if words and not words[0].startswith("-"):
        words = ["--model-path", *words]
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    parser.add_argument("--model-path")
    parser.add_argument("--tokenizer-path")
    parser.add_argument("--chat-template")
    parser.add_argument("--revision")
    parser.add_argument("--trust-remote-code", action="store_true")
    known, _ = parser.parse_known_args(words)
    return known


def sglang_template(given: str | None, argv: list[str]) -> Template:
    """The template ``sglang serve ARGV`` serves (``given``, else its
    ``--chat-template`` where that is a Jinja file, else the tokenizer's), with the
    tokenizer's tokens."""
    args = _sglang_arguments(argv)
    if args.model_path is None:
        if given is not None:
            return Template(given, None, None, "CHATFMT_CHAT_TEMPLATE")
        raise Refused(
            "no --model-path on the command line to tell the served model by; name it "
            "there, or the chat template in CHATFMT_CHAT_TEMPLATE"
        )
    origin = f"SGLang serving {args.model_path}"
    if given is None and args.chat_template:
        if not args.chat_template.endswith(".jinja") or not os.path.isfile(args.chat_template):
            raise Refused(
                f"--chat-template {args.chat_template} is no Jinja file: SGLang's own "
                "templates are not analysed"
            )
        given = _read(args.chat_template, "the chat template")
    # SGLang loads its tokenizer with transformers' AutoTokenizer and takes the chat
    # template from it as it is; its own loader imports half of SGLang (its model
    # configurations, torchvision), which the launcher has no need of yet.
    from transformers import AutoTokenizer

    name = args.tokenizer_path or args.model_path
    try:
        tokenizer = AutoTokenizer.from_pretrained(
            name, trust_remote_code=args.trust_remote_code, revision=args.revision
        )
    except Exception as error:
        raise Refused(f"{origin}: cannot load the tokenizer {name}: {error}") from None
    return _tokenizer_template(tokenizer, origin, given)


def drop_flag(argv: list[str], flag: str, name: str) -> bool:
    """Take ``flag name`` (or ``flag=name``) out of ``argv``; whether it was there."""
    for at, word in enumerate(argv):
        if word == f"{flag}={name}":
            del argv[at]
            return True
        if word == flag and argv[at + 1 : at + 2] == [name]:
            del argv[at : at + 2]
            return True
    return False


# --------------------------------------------------------------------------- start


def interpreter(python: str) -> str:
    """``python`` as a path that holds in any folder: a relative path with a folder in
    it is the server's (the compiler runs in a folder of the cache); a bare name is
    looked up on PATH, wherever it runs."""
    if os.sep in python or (os.altsep is not None and os.altsep in python):
        return os.path.abspath(python)
    return python


def default_cache() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "chatfmt")


def handoff_variable(name: str) -> str:
    """The environment variable that tells the server's child processes the parser
    their parent found."""
    return "CHATFMT_STARTED_" + re.sub(r"[^A-Za-z0-9]", "_", name).upper()


def _template(server: str) -> Template:
    path = os.environ.get("CHATFMT_CHAT_TEMPLATE")
    given = _read(path, "the chat template (CHATFMT_CHAT_TEMPLATE)") if path else None
    if server == "vllm":
        return vllm_template(given)
    return sglang_template(given, sys.argv)


def start(
    server: str,
    name: str,
    *,
    specs: str | None,
    cache: str | None,
    module_name: str,
    label: str,
    log: Callable[[str], None] = _log,
) -> Started:
    """Find the served model's parser, load it as ``module_name``, and say what the
    plugin's code reads; SystemExit with one line where the server must not start."""
    variable = handoff_variable(name)
    try:
        inherited = os.environ.get(variable)
        if inherited and os.path.isfile(inherited):
            path, spec = inherited, inherited
        else:
            resolved = resolve(
                _template(server),
                specs=os.environ.get("CHATFMT_SPECS") or specs,
                cache=os.environ.get("CHATFMT_CACHE") or cache or default_cache(),
                python=os.environ.get("CHATFMT_PYTHON") or sys.executable,
                log=log,
            )
            path, spec = resolved.module, resolved.spec
        found = started(load(path, module_name, label), spec)
    except Refused as error:
        raise SystemExit(f"chatfmt: refusing to start the {name!r} parsers: {error}") from None
    os.environ[variable] = path
    if server == "sglang":
        _only_present_parsers(name, found, log)
    return found


def _only_present_parsers(name: str, found: Started, log: Callable[[str], None]) -> None:
    """SGLang takes a parser name only where it is registered, and the plugin registers
    only the parts its format has: one command line serves every model, so the flag
    of a part the format lacks is taken out before SGLang reads it."""
    for flag, present, part in (
        ("--tool-call-parser", found.has_calls, "tool calls"),
        ("--reasoning-parser", bool(found.reasoning_end), "reasoning"),
    ):
        if not present and drop_flag(sys.argv, flag, name):
            log(f"chatfmt: the served format has no {part}: {flag} {name} dropped")
