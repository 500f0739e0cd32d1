"""The one place where chat templates are rendered.

Templates are untrusted code. They run in jinja2's sandbox with the extensions and
globals Hugging Face's ``apply_chat_template`` provides, under a time limit per render,
a time budget for all the renders of one template, an output-size limit, and always on
fresh copies of their inputs (two corpus templates mutate the lists they are given).

Every operator, filter, global and method that can build a large value from small
inputs (``*``, ``**``, ``+``, ``%``, ``~``, ``str.format``, ``center``, ``indent``,
``format``, ``join``, ``replace``, ``wordwrap``, ``batch``, ``slice``, ``tojson``'s
indent, ``lipsum``, ``str.center``/``ljust``/``rjust``/``zfill``/``expandtabs``/
``replace``/``join``, a list's ``extend``) checks the size of its result before it is
made; and, as a backstop for what no check foresaw, a render on the main thread of a
Linux process may map at most ``DEFAULT_MEMORY_HEADROOM`` bytes more than the process
had when it began (``RLIMIT_AS``): past that, allocation fails and the render stops with
a limit error instead of taking the machine's memory.
"""

from __future__ import annotations

import copy
import functools
import inspect
import json
import os
import re
import signal
import sys
import threading
import time
import traceback
import types
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Iterable

import jinja2
import jinja2.meta
from jinja2 import nodes
from jinja2.compiler import CodeGenerator
from jinja2.ext import Extension, loopcontrols
from jinja2.parser import Parser
from jinja2.sandbox import SandboxedEnvironment, SandboxedFormatter

from .tokens import SPECIAL_TOKENS

try:
    import resource
except ImportError:  # not on every platform; the size checks still hold
    resource = None  # type: ignore[assignment]

# Stand-ins for the tokenizer's bos/eos when the source does not give them. They are
# shaped like special tokens so the diff treats them as one marker; the analysis
# records "the tokenizer's eos" wherever it meets them, never the text itself.
BOS_PLACEHOLDER = "<|bos-token-placeholder|>"
EOS_PLACEHOLDER = "<|eos-token-placeholder|>"

# The tokenizer's other special tokens (tokens.SPECIAL_TOKENS), which Hugging Face
# passes to a template when the tokenizer has them. A template that reads one the source
# does not give may be rendered with a stand-in shaped like the bos/eos ones.


def placeholder(name: str) -> str:
    """The stand-in for the special token ``name`` ("sep_token" → "<|sep-token-placeholder|>")."""
    return "<|" + name.replace("_", "-") + "-placeholder|>"


PLACEHOLDERS = (BOS_PLACEHOLDER, EOS_PLACEHOLDER, *map(placeholder, SPECIAL_TOKENS))

# strftime_now must not make renders depend on the day they ran.
FIXED_NOW = datetime(2026, 1, 15, 12, 0, 0)

DEFAULT_TIME_LIMIT = 5.0  # seconds per render
DEFAULT_TIME_BUDGET = 60.0  # seconds for all the renders of one template
DEFAULT_OUTPUT_LIMIT = 1 << 20  # characters per render
DEFAULT_MEMORY_HEADROOM = 512 << 20  # bytes a render may map beyond what the process had
_MAX_SEQUENCE = 1 << 20  # longest string or list an operator may build
_MAX_INT_BITS = 1 << 20  # largest integer (in bits) arithmetic may build


class RenderError(Exception):
    """A template failed to parse or render; says which file and line."""

    def __init__(self, path: str, line: int | None, message: str):
        self.path = path
        self.line = line
        self.message = message
        where = f"{path}:{line}" if line else path
        super().__init__(f"{where}: {message}")


class TemplateRaised(RenderError):
    """The template called ``raise_exception``: it refuses these inputs.

    Probes read this as "the template cannot express that", not as a failure.
    """


class RenderLimitExceeded(RenderError):
    """The render ran past one of the sandbox's bounds; ``bound`` says which, and the
    message starts with it:

    - ``"size"``: a value or the output would be larger than the sandbox allows
      (refused before it is built);
    - ``"memory"``: an allocation failed under the memory cap;
    - ``"time"``: the render ran past its time limit, or the template's renders past
      their time budget (wall-clock: see docs/reliability.md);
    - ``"cpu"``: one step of the render (a long call into C) ran past twice the time
      limit in CPU time;
    - ``"recursion"``: Python's recursion limit.
    """

    def __init__(self, path: str, line: int | None, message: str, bound: str = "size"):
        self.bound = bound
        super().__init__(path, line, message)


class _Raised(Exception):
    pass


class _Limit(Exception):
    """A bound the render met; ``bound`` as in ``RenderLimitExceeded``."""

    def __init__(self, message: str, bound: str = "size"):
        super().__init__(message)
        self.bound = bound


class GenerationTag(Extension):
    """Hugging Face's ``{% generation %}…{% endgeneration %}``: render the body as is."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return nodes.Scope(body, lineno=lineno)


def _plain(value: Any) -> Any:
    """Turn what a template may hand to ``tojson`` into JSON-serialisable values."""
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, jinja2.Undefined):
        return None
    if isinstance(value, Iterable):
        return [_plain(item) for item in value]
    return str(value)


def _tojson(value, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(
        _plain(value),
        ensure_ascii=ensure_ascii,
        indent=indent,
        separators=separators,
        sort_keys=sort_keys,
    )


def _raise_exception(message):
    raise _Raised(str(message))


def _strftime_now(fmt):
    return FIXED_NOW.strftime(fmt)


_SIZED = (str, list, tuple, bytes, bytearray, dict, set, frozenset)
_TEXT = (str, bytes, bytearray)


def _sized(value: Any) -> Any:
    if isinstance(value, _SIZED) and len(value) > _MAX_SEQUENCE:
        raise _Limit(f"an expression built a value of {len(value)} items")
    return value


def _allow(size: int, what: str = "an expression") -> None:
    """Refuse, before it is made, a value of ``size`` characters or items."""
    if size > _MAX_SEQUENCE:
        raise _Limit(f"{what} would build a value of {size} items (at most {_MAX_SEQUENCE})")


def _allow_width(width: Any, what: str) -> None:
    if isinstance(width, int) and not isinstance(width, bool):
        _allow(width, what)


# A number in a format specification: a width or a precision.
_DIGITS = re.compile(r"\d+")
# A printf-style conversion of ``str % args``.
_PERCENT = re.compile(
    r"%(?:\([^)]*\))?[#0\- +]*(\*|\d+)?(?:\.(\*|\d*))?[hlL]?[diouxXeEfFgGcrsa%]"
)


def _allow_spec(spec: str, what: str) -> None:
    """A format specification (``str.format``'s or ``%``'s) whose widths and
    precisions keep the result within the limit."""
    for digits in _DIGITS.findall(spec):
        if len(digits) > 7 or int(digits) > _MAX_SEQUENCE:
            raise _Limit(f"{what} asks for a field {digits} characters wide")


def _allow_percent(text: Any, args: Any) -> None:
    """``text % args``: no conversion wider than the limit, ``*`` widths included."""
    if isinstance(text, (bytes, bytearray)):
        text = text.decode("latin-1")
    if not isinstance(text, str):
        return
    starred = False
    for match in _PERCENT.finditer(text):
        _allow_spec(match.group(0), "a % format")
        starred = starred or "*" in match.group(0)
    if starred:
        values = args if isinstance(args, tuple) else (args,)
        for value in values:
            _allow_width(abs(value) if isinstance(value, int) else value, "a % format")


def _text_size(value: Any) -> int:
    return len(value) if isinstance(value, _TEXT) else 0


def _allow_join(separator: Any, items: list) -> None:
    size = sum(map(_text_size, items)) + _text_size(separator) * max(len(items) - 1, 0)
    _allow(size, "a join")


def _allow_replace(text: Any, old: Any, new: Any, count: Any) -> None:
    if not all(isinstance(value, _TEXT) for value in (text, old, new)):
        return
    if len(new) <= len(old):
        return
    try:
        found: int = text.count(old) if old else len(text) + 1
    except TypeError:
        return  # str and bytes mixed: the method says so itself
    if isinstance(count, int) and count >= 0:
        found = min(found, count)
    _allow(len(text) + found * (len(new) - len(old)), "a replace")


def _allow_binop(operator: str, left: Any, right: Any) -> None:
    if operator == "*":
        for seq, times in ((left, right), (right, left)):
            if isinstance(seq, _SIZED) and isinstance(times, int):
                _allow(len(seq) * max(times, 0), "a repetition")
        if isinstance(left, int) and isinstance(right, int):
            if left.bit_length() + right.bit_length() > _MAX_INT_BITS:
                raise _Limit("a product too large")
    elif operator == "**":
        if isinstance(left, int) and isinstance(right, int):
            if right > 4096 or abs(left).bit_length() * max(right, 0) > _MAX_INT_BITS:
                raise _Limit("exponent too large")
    elif operator == "+":
        if isinstance(left, _SIZED) and isinstance(right, _SIZED):
            _allow(len(left) + len(right), "a concatenation")
    elif operator == "%":
        _allow_percent(left, right)


def _checked_join(seq: Iterable[Any]) -> str:
    """``a ~ b ~ …``: jinja's ``str_join``, refusing a result over the limit."""
    texts = [item if isinstance(item, str) else str(item) for item in seq]
    _allow(sum(map(len, texts)), "a ~ concatenation")
    return "".join(texts)


class _CheckedCodeGenerator(CodeGenerator):
    """jinja's code generator, except that ``~`` joins through ``_checked_join``."""

    def visit_Concat(self, node, frame):
        if frame.eval_ctx.volatile or frame.eval_ctx.autoescape:
            return super().visit_Concat(node, frame)
        self.write("environment.checked_join((")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")


class _CheckedFormatter(SandboxedFormatter):
    """``str.format`` in the sandbox, refusing a field wider than the limit."""

    def format_field(self, value: Any, format_spec: str) -> Any:
        _allow_spec(format_spec, "a format field")
        return _sized(super().format_field(value, format_spec))


def _checked_filter(original, check):
    """``original`` (a jinja filter) with ``check`` run on its bound arguments first."""
    signature = inspect.signature(original)
    parameters = list(signature.parameters.values())
    passed = getattr(original, "jinja_pass_arg", None) is not None
    if passed and (not parameters or parameters[0].name not in ("eval_ctx", "environment", "context")):
        # jinja's async_variant passes the eval context to a function that takes none.
        passed_arg = inspect.Parameter("passed_arg", inspect.Parameter.POSITIONAL_ONLY)
        signature = signature.replace(parameters=[passed_arg, *parameters])

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError:
            return original(*args, **kwargs)  # let the filter say what is wrong
        bound.apply_defaults()
        replaced = check(bound.arguments)
        if isinstance(replaced, dict):  # the check had to read an iterator: pass on its items
            bound.arguments.update(replaced)
            return _sized(original(*bound.args, **bound.kwargs))
        return _sized(original(*args, **kwargs))

    return wrapper


def _check_indent(a: dict) -> None:
    width, text = a["width"], a["s"]
    step = len(width) if isinstance(width, str) else width if isinstance(width, int) else 0
    lines = text.count("\n") + 1 if isinstance(text, str) else 1
    _allow(_text_size(text) + max(step, 0) * lines, "indent")


def _check_join(a: dict) -> dict:
    items = list(a["value"])
    _allow_join(a["d"], items)
    return {"value": items}


def _check_wordwrap(a: dict) -> None:
    text, wrap = a["s"], a["wrapstring"]
    if not isinstance(text, str) or not isinstance(wrap, str):
        return
    width = a["width"] if isinstance(a["width"], int) and a["width"] > 0 else 1
    breaks = len(text) // width + sum(map(text.count, " \t\n\r\f\v-")) + 1
    _allow(len(text) + len(wrap) * breaks, "wordwrap")


def _check_tojson(a: dict) -> None:
    indent, separators = a["indent"], a["separators"]
    _allow_width(indent, "tojson's indent")
    if isinstance(indent, str):
        _allow(len(indent) * 1024, "tojson's indent")
    for separator in separators or ():
        if isinstance(separator, str):
            _allow(len(separator) * 1024, "tojson's separators")


_FILTER_CHECKS = {
    "center": lambda a: _allow_width(a["width"], "center"),
    "indent": _check_indent,
    "format": lambda a: _allow_percent(a["value"], a["kwargs"] or a["args"]),
    "join": _check_join,
    "replace": lambda a: _allow_replace(a["s"], a["old"], a["new"], a["count"]),
    "wordwrap": _check_wordwrap,
    "batch": lambda a: _allow_width(a["linecount"] if a["fill_with"] is not None else 0, "batch"),
    "slice": lambda a: _allow_width(a["slices"], "slice"),
}


def _check_lipsum(a: dict) -> None:
    n, most = a["n"], a["max"]
    if isinstance(n, int) and isinstance(most, int):
        _allow(max(n, 0) * max(most, 0) * 16, "lipsum")


def _allow_text_method(text: Any, name: str, args: tuple, kwargs: dict) -> tuple:
    """A str (or bytes) method that may build a large value: refused when it would
    be too large; the arguments to call it with (an iterator read into a list)."""
    what = f"{type(text).__name__}.{name}"
    if name in ("center", "ljust", "rjust", "zfill"):
        _allow_width(args[0] if args else kwargs.get("width"), what)
    elif name == "expandtabs":
        size = args[0] if args else kwargs.get("tabsize", 8)
        if isinstance(size, int):
            tab = "\t" if isinstance(text, str) else b"\t"
            _allow(len(text) + text.count(tab) * max(size, 0), what)
    elif name == "replace" and len(args) >= 2:
        _allow_replace(text, args[0], args[1], args[2] if len(args) > 2 else kwargs.get("count", -1))
    elif name == "join" and args:
        items = list(args[0])
        _allow_join(text, items)
        return (items, *args[1:])
    return args


class _Budget:
    """Deadline and output budget of the render running on this thread."""

    def __init__(self):
        self.local = threading.local()

    def start(self, seconds: float):
        self.local.deadline = time.monotonic() + seconds

    def stop(self):
        self.local.deadline = None

    def check(self):
        deadline = getattr(self.local, "deadline", None)
        if deadline is not None and time.monotonic() > deadline:
            raise _Limit(_TIME, "time")


_TIME = "time limit exceeded"  # the message of the "time" bound
_budget = _Budget()


class ChatSandbox(SandboxedEnvironment):
    """The sandbox plus limits: every call and every loop over ``range`` checks the clock,
    and operators, filters and methods that can build large values check their size
    before they build them."""

    intercepted_binops = frozenset({"*", "**", "+", "%"})
    code_generator_class = _CheckedCodeGenerator

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.checked_join = _checked_join
        for name, check in _FILTER_CHECKS.items():
            if name in self.filters:
                self.filters[name] = _checked_filter(self.filters[name], check)
        self.globals["lipsum"] = _checked_filter(self.globals["lipsum"], _check_lipsum)

    def call_binop(self, context, operator_name, left, right):
        _allow_binop(operator_name, left, right)
        result = super().call_binop(context, operator_name, left, right)
        return _sized(result)

    def call(__self, __context, __obj, *args, **kwargs):  # noqa: N805 (jinja's signature)
        _budget.check()
        owner = getattr(__obj, "__self__", None)
        name = getattr(__obj, "__name__", "")
        if isinstance(__obj, types.BuiltinMethodType) and owner is not None:
            if isinstance(owner, _TEXT):
                args = _allow_text_method(owner, name, args, kwargs)
            elif isinstance(owner, (list, dict, set, bytearray)):
                if name in ("extend", "update") and args and isinstance(args[0], _SIZED):
                    _allow(len(owner) + len(args[0]), f"{type(owner).__name__}.{name}")
        result = _sized(super().call(__context, __obj, *args, **kwargs))
        if isinstance(owner, (list, dict, set, bytearray)):
            _sized(owner)  # a container a method grew
        return result

    def wrap_str_format(self, value: Any):
        """``str.format``/``format_map`` through ``_CheckedFormatter`` (jinja's own,
        with the width check)."""
        wrapped = super().wrap_str_format(value)
        if wrapped is None or type(value.__self__) is not str:
            return wrapped  # Markup keeps jinja's escaping formatter
        formatter = _CheckedFormatter(self)
        text = value.__self__
        if value.__name__ == "format_map":

            def format_map(*args: Any, **kwargs: Any) -> str:
                if kwargs:
                    raise TypeError("format_map() takes no keyword arguments")
                if len(args) != 1:
                    raise TypeError(f"format_map() takes exactly one argument ({len(args)} given)")
                return type(text)(formatter.vformat(text, (), args[0]))

            return functools.update_wrapper(format_map, value)

        def format(*args: Any, **kwargs: Any) -> str:
            return type(text)(formatter.vformat(text, args, kwargs))

        return functools.update_wrapper(format, value)


class _CheckedRange:
    """``range`` as templates see it under Hugging Face (length, indexing, reversal,
    reuse, ``range(0, 3)`` when printed), except that iterating checks the clock."""

    __slots__ = ("_span",)

    def __init__(self, span: range):
        self._span = span

    def __iter__(self):
        for index in self._span:
            _budget.check()
            yield index

    def __reversed__(self):
        for index in reversed(self._span):
            _budget.check()
            yield index

    def __len__(self):
        return len(self._span)

    def __contains__(self, item):
        return item in self._span

    def __getitem__(self, key):
        item = self._span[key]
        return _CheckedRange(item) if isinstance(item, range) else item

    def __eq__(self, other):
        if isinstance(other, _CheckedRange):
            other = other._span
        return self._span == other

    def __hash__(self):
        return hash(self._span)

    def __repr__(self):
        return repr(self._span)

    start = property(lambda self: self._span.start)
    stop = property(lambda self: self._span.stop)
    step = property(lambda self: self._span.step)

    def count(self, item):
        return self._span.count(item)

    def index(self, item):
        return self._span.index(item)


def _checked_range(*args) -> _CheckedRange:
    span = range(*args)
    if len(span) > 100_000:
        raise _Limit("range too large")
    return _CheckedRange(span)


def make_environment() -> ChatSandbox:
    env = ChatSandbox(
        trim_blocks=True,
        lstrip_blocks=True,
        extensions=[loopcontrols, GenerationTag],
        keep_trailing_newline=False,
    )
    env.filters["tojson"] = _checked_filter(_tojson, _check_tojson)
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    env.globals["range"] = _checked_range
    return env


@dataclass(frozen=True)
class RenderInputs:
    """What a template needs besides messages and tools.

    ``special_tokens``: the tokenizer's other special tokens (``SPECIAL_TOKENS``) to
    pass, name → text, or None where the source does not give the text: the template
    then reads a placeholder. ``content_as_parts``: every message's text content is
    passed as a list of one part, ``[{"type": "text", "text": …}]``, for templates that
    read content only in that form.
    """

    bos_token: str | None = None
    eos_token: str | None = None
    variables: dict = field(default_factory=dict)
    special_tokens: dict = field(default_factory=dict)
    content_as_parts: bool = False

    @property
    def bos(self) -> str:
        return BOS_PLACEHOLDER if self.bos_token is None else self.bos_token

    @property
    def eos(self) -> str:
        return EOS_PLACEHOLDER if self.eos_token is None else self.eos_token

    def tokens(self) -> dict[str, str]:
        """The special tokens as the template sees them, placeholders included."""
        return {
            name: placeholder(name) if text is None else text
            for name, text in self.special_tokens.items()
        }

    def messages(self, messages: list[dict]) -> list[dict]:
        """``messages`` as the template receives them (a fresh copy)."""
        messages = copy.deepcopy(messages)
        if self.content_as_parts:
            for message in messages:
                if isinstance(message, dict) and isinstance(message.get("content"), str):
                    message["content"] = [{"type": "text", "text": message["content"]}]
        return messages

    def as_spec(self, tool_shape: str) -> dict:
        """The spec's ``render_inputs``: these inputs and the tool shape the analysis
        passed tools in; the two optional ones only where they are used, so the specs
        of templates that need neither keep their shape."""
        record: dict = {
            "bos_token": self.bos_token,
            "eos_token": self.eos_token,
            "variables": dict(self.variables),
            "tool_shape": tool_shape,
        }
        if self.special_tokens:
            record["special_tokens"] = dict(self.special_tokens)
        if self.content_as_parts:
            record["content_as_parts"] = True
        return record

    @classmethod
    def from_spec(cls, record: dict) -> "RenderInputs":
        """The inputs a spec's ``render_inputs`` records: the renders the spec was read
        from can be made again."""
        return cls(
            record.get("bos_token"),
            record.get("eos_token"),
            dict(record.get("variables", {})),
            dict(record.get("special_tokens", {})),
            bool(record.get("content_as_parts", False)),
        )


class ChatTemplate:
    """A compiled chat template that renders only inside the sandbox, within limits."""

    def __init__(
        self,
        source: str,
        path: str,
        inputs: RenderInputs | None = None,
        *,
        time_limit: float = DEFAULT_TIME_LIMIT,
        time_budget: float | None = DEFAULT_TIME_BUDGET,
        output_limit: int = DEFAULT_OUTPUT_LIMIT,
        memory_headroom: int | None = DEFAULT_MEMORY_HEADROOM,
    ):
        """``time_limit``: seconds per render; ``time_budget``: seconds for all the
        renders of this template together (None: no budget); ``memory_headroom``: bytes
        a render (or the compilation) may map beyond what the process had (None: no
        such cap; the size checks still hold)."""
        self.source = source
        self.path = path
        self.inputs = inputs or RenderInputs()
        # The variables the template switches thinking with and their values, for
        # thinking on (True) and off (False) (capabilities.thinking_switch): a render
        # with enable_thinking True or False sets them so; None: no switch.
        self.thinking_switch: dict[bool, dict[str, Any]] | None = None
        self.time_limit = time_limit
        self.time_budget = time_budget
        self.spent = 0.0  # seconds the renders took so far
        self.output_limit = output_limit
        self.memory_headroom = memory_headroom
        self._undeclared: list[str] | None = None
        self.env = make_environment()
        try:
            with _MemoryCap(memory_headroom):
                self.template = self.env.from_string(source)
        except jinja2.TemplateSyntaxError as error:
            raise RenderError(path, error.lineno, error.message or str(error)) from None
        except (RecursionError, SyntaxError, MemoryError) as error:
            # Python's limits on nesting: 200 nested blocks are more indented blocks
            # than Python compiles, deep parentheses more frames than it recurses.
            line, why = self._compile_failure(error)
            raise RenderError(path, line, f"cannot be compiled: {why}") from None
        self.template.filename = path

    def _compile_failure(self, error: BaseException) -> tuple[int | None, str]:
        """Where compiling ran into one of Python's limits, and which."""
        if isinstance(error, RecursionError):
            why = "nested too deeply (Python's recursion limit)"
            parser = Parser(self.env, self.source, filename=self.path)
            try:
                parser.parse()
            except RecursionError:
                return parser.stream.current.lineno, why
            except Exception:
                pass
            return None, why
        if isinstance(error, MemoryError):
            return None, "out of memory"
        why = f"{getattr(error, 'msg', error)} (a limit of Python's on nesting)"
        try:
            code = self.env.compile(self.source, raw=True)
        except Exception:
            return None, why
        found = re.search(r"^debug_info = '([0-9=&]*)'$", str(code), re.MULTILINE)
        line = None
        for pair in found.group(1).split("&") if found and found.group(1) else ():
            template_line, code_line = map(int, pair.split("="))
            if code_line <= (getattr(error, "lineno", None) or 0):
                line = template_line
        return line, why

    def undeclared_variables(self) -> list[str]:
        # The build and the probe both ask; finding them costs a parse and a code
        # generation pass, as much as compiling the template.
        if self._undeclared is None:
            ast = self.env.parse(self.source)
            self._undeclared = sorted(jinja2.meta.find_undeclared_variables(ast))
        return list(self._undeclared)

    def render(
        self,
        messages: list[dict],
        *,
        tools: list[dict] | None = None,
        add_generation_prompt: bool = False,
        enable_thinking: bool | None = True,
        **extra: Any,
    ) -> str:
        """``enable_thinking``: thinking on or off, as a request sets it (the template's
        own switch where it has one); None: not given, the switch left undefined."""
        context = dict(copy.deepcopy(self.inputs.variables))
        context.update(copy.deepcopy(extra))
        context.update(self.inputs.tokens())
        context.update(
            messages=self.inputs.messages(messages),
            add_generation_prompt=add_generation_prompt,
            bos_token=self.inputs.bos,
            eos_token=self.inputs.eos,
        )
        if enable_thinking is not None:
            context["enable_thinking"] = enable_thinking
            if self.thinking_switch:
                for name, value in self.thinking_switch[bool(enable_thinking)].items():
                    if name not in extra:
                        context[name] = value
        if tools is not None:
            context["tools"] = copy.deepcopy(tools)
        return self._run(context)

    def _run(self, context: dict) -> str:
        pieces: list[str] = []
        size = 0
        limit = self.time_limit
        if self.time_budget is not None:
            left = self.time_budget - self.spent
            if left <= 0:
                raise RenderLimitExceeded(self.path, None, self._over_budget(), "time")
            limit = min(limit, left)
        _budget.start(limit)
        alarm = _Alarm(limit * 2)
        started = time.monotonic()
        try:
            with alarm, _MemoryCap(self.memory_headroom):
                for piece in self.template.generate(context):
                    size += len(piece)
                    if size > self.output_limit:
                        raise _Limit(f"output longer than {self.output_limit} characters")
                    pieces.append(piece)
        except _Raised as error:
            raise TemplateRaised(self.path, self._line(error), str(error)) from None
        except _Limit as error:
            message = f"size limit: {error}" if error.bound == "size" else str(error)
            if error.bound == "time":
                message = self._over_budget() if limit < self.time_limit else str(error)
            line = self._line(error)
            raise RenderLimitExceeded(self.path, line, message, error.bound) from None
        except RecursionError as error:
            line = self._line(error)
            message = "recursion limit: the render recursed too deeply"
            raise RenderLimitExceeded(self.path, line, message, "recursion") from None
        except MemoryError as error:
            # The cap of _MemoryCap (or the machine) refused an allocation.
            message = "memory limit exceeded: the render built values too large"
            raise RenderLimitExceeded(self.path, self._line(error), message, "memory") from None
        except jinja2.TemplateError as error:
            message = getattr(error, "message", None) or str(error)
            raise RenderError(self.path, self._line(error), message) from None
        except Exception as error:  # a template can raise anything a Python op can
            message = f"{type(error).__name__}: {error}"
            raise RenderError(self.path, self._line(error), message) from None
        finally:
            _budget.stop()
            self.spent += time.monotonic() - started
        return "".join(pieces)

    def _over_budget(self) -> str:
        return (
            f"time budget exceeded: the template's renders took {self.spent:.1f} s in all "
            f"(at most {self.time_budget:g} s per template)"
        )

    def _line(self, error: BaseException) -> int | None:
        line = getattr(error, "lineno", None)
        for frame, lineno in traceback.walk_tb(error.__traceback__):
            if frame.f_code.co_filename == self.path:
                line = lineno
        if line is None:
            line = _line_from_template_frames(self.template, error)
        return line


def _line_from_template_frames(template, error: BaseException) -> int | None:
    """Map the deepest frame of jinja's generated code back to a template line."""
    line = None
    for frame, lineno in traceback.walk_tb(error.__traceback__):
        if frame.f_globals.get("__jinja_template__") is not None:
            debug = template.debug_info
            for template_line, code_line in debug:
                if code_line <= lineno:
                    line = template_line
    return line


class _Alarm:
    """The backstop for the clock checks, for one step of a render that does not come
    back to them (a long call into C): SIGPROF once the process has spent ``seconds``
    of CPU time (``ITIMER_PROF``), where this thread may set it (the main thread, where
    the platform has it). CPU time, not the wall clock: the steps it stops are the
    ones the memory cap and the size checks stop too, and on a loaded machine the wall
    clock would win that race for want of CPU (a 1 GB repr reported as a time limit
    where it is a memory one), so which bound stops a render would depend on the load.
    """

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.armed = False

    def __enter__(self):
        if (
            threading.current_thread() is threading.main_thread()
            and hasattr(signal, "setitimer")
            and hasattr(signal, "SIGPROF")
        ):
            self.previous = signal.signal(signal.SIGPROF, self._fire)
            signal.setitimer(signal.ITIMER_PROF, self.seconds)
            self.armed = True
        return self

    def __exit__(self, *exc):
        if self.armed:
            signal.setitimer(signal.ITIMER_PROF, 0)
            signal.signal(signal.SIGPROF, self.previous)
        return False

    def _fire(self, signum, frame):
        raise _Limit(f"CPU time limit exceeded ({self.seconds:g} s in one step)", "cpu")


class _MemoryCap:
    """The backstop for the size checks: while it holds, the process may map at most
    ``headroom`` bytes more than it had when it began (Linux's ``RLIMIT_AS``), so an
    allocation no check foresaw fails with MemoryError at once instead of taking the
    machine's memory. Only on the main thread (the limit is the whole process's, and
    another thread's render would move it); elsewhere it does nothing."""

    def __init__(self, headroom: int | None):
        self.headroom = headroom
        self.previous: tuple[int, int] | None = None

    def __enter__(self):
        if (
            self.headroom is None
            or resource is None
            or not sys.platform.startswith("linux")
            or threading.current_thread() is not threading.main_thread()
        ):
            return self
        try:
            with open("/proc/self/statm", encoding="ascii") as handle:
                mapped = int(handle.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
            soft, hard = resource.getrlimit(resource.RLIMIT_AS)
            cap = mapped + self.headroom
            if hard != resource.RLIM_INFINITY:
                cap = min(cap, hard)
            if soft != resource.RLIM_INFINITY and soft <= cap:
                return self  # a tighter cap is already in force
            resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
            self.previous = (soft, hard)
        except (OSError, ValueError):
            pass
        return self

    def __exit__(self, *exc):
        if self.previous is not None and resource is not None:
            resource.setrlimit(resource.RLIMIT_AS, self.previous)
            self.previous = None
        return False


def load(path: str, inputs: RenderInputs | None = None) -> ChatTemplate:
    with open(path, encoding="utf-8") as handle:
        source = handle.read()
    return ChatTemplate(source, path, inputs)

__all__ = [
    "DEFAULT_TIME_BUDGET",
    "BOS_PLACEHOLDER",
    "EOS_PLACEHOLDER",
    "PLACEHOLDERS",
    "SPECIAL_TOKENS",
    "ChatTemplate",
    "RenderError",
    "RenderInputs",
    "RenderLimitExceeded",
    "TemplateRaised",
    "load",
    "make_environment",
    "placeholder",
]
