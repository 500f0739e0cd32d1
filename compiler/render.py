"""The one place where chat templates are rendered.

Templates are untrusted code. They run in jinja2's sandbox with the extensions and
globals Hugging Face's ``apply_chat_template`` provides, under a time limit and an
output-size limit, and always on fresh copies of their inputs (two corpus templates
mutate the lists they are given).
"""

from __future__ import annotations

import copy
import json
import signal
import threading
import time
import traceback
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Iterable

import jinja2
import jinja2.meta
from jinja2 import nodes
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import SandboxedEnvironment

# Stand-ins for the tokenizer's bos/eos when the source does not give them. They are
# shaped like special tokens so the diff treats them as one marker; the analysis
# records "the tokenizer's eos" wherever it meets them, never the text itself.
BOS_PLACEHOLDER = "<|bos-token-placeholder|>"
EOS_PLACEHOLDER = "<|eos-token-placeholder|>"

# strftime_now must not make renders depend on the day they ran.
FIXED_NOW = datetime(2026, 1, 15, 12, 0, 0)

DEFAULT_TIME_LIMIT = 5.0  # seconds per render
DEFAULT_OUTPUT_LIMIT = 1 << 20  # characters per render
_MAX_SEQUENCE = 1 << 20  # longest string or list an operator may build


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
    """The render ran past its time or output limit."""


class _Raised(Exception):
    pass


class _Limit(Exception):
    pass


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


def _sized(value: Any) -> Any:
    if isinstance(value, (str, list, tuple)) and len(value) > _MAX_SEQUENCE:
        raise _Limit(f"an expression built a value of {len(value)} items")
    return value


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
            raise _Limit("time limit exceeded")


_budget = _Budget()


class ChatSandbox(SandboxedEnvironment):
    """The sandbox plus limits: every call and every loop over ``range`` checks the clock,
    and operators that repeat sequences may not build huge values."""

    intercepted_binops = frozenset({"*", "**", "+"})

    def call_binop(self, context, operator_name, left, right):
        if operator_name == "**" and isinstance(right, int) and right > 4096:
            raise _Limit("exponent too large")
        if operator_name == "*":
            for seq, times in ((left, right), (right, left)):
                if isinstance(seq, (str, list, tuple)) and isinstance(times, int):
                    if len(seq) * max(times, 0) > _MAX_SEQUENCE:
                        raise _Limit("an expression built a value too large")
        result = super().call_binop(context, operator_name, left, right)
        return _sized(result)

    def call(__self, __context, __obj, *args, **kwargs):  # noqa: N805 (jinja's signature)
        _budget.check()
        return _sized(super().call(__context, __obj, *args, **kwargs))


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
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    env.globals["range"] = _checked_range
    return env


@dataclass(frozen=True)
class RenderInputs:
    """What a template needs besides messages and tools."""

    bos_token: str | None = None
    eos_token: str | None = None
    variables: dict = field(default_factory=dict)

    @property
    def bos(self) -> str:
        return BOS_PLACEHOLDER if self.bos_token is None else self.bos_token

    @property
    def eos(self) -> str:
        return EOS_PLACEHOLDER if self.eos_token is None else self.eos_token


class ChatTemplate:
    """A compiled chat template that renders only inside the sandbox, within limits."""

    def __init__(
        self,
        source: str,
        path: str,
        inputs: RenderInputs | None = None,
        *,
        time_limit: float = DEFAULT_TIME_LIMIT,
        output_limit: int = DEFAULT_OUTPUT_LIMIT,
    ):
        self.source = source
        self.path = path
        self.inputs = inputs or RenderInputs()
        self.time_limit = time_limit
        self.output_limit = output_limit
        self.env = make_environment()
        try:
            self.template = self.env.from_string(source)
        except jinja2.TemplateSyntaxError as error:
            raise RenderError(path, error.lineno, error.message or str(error)) from None
        self.template.filename = path

    def undeclared_variables(self) -> list[str]:
        ast = self.env.parse(self.source)
        return sorted(jinja2.meta.find_undeclared_variables(ast))

    def render(
        self,
        messages: list[dict],
        *,
        tools: list[dict] | None = None,
        add_generation_prompt: bool = False,
        enable_thinking: bool = True,
        **extra: Any,
    ) -> str:
        context = dict(copy.deepcopy(self.inputs.variables))
        context.update(copy.deepcopy(extra))
        context.update(
            messages=copy.deepcopy(messages),
            add_generation_prompt=add_generation_prompt,
            enable_thinking=enable_thinking,
            bos_token=self.inputs.bos,
            eos_token=self.inputs.eos,
        )
        if tools is not None:
            context["tools"] = copy.deepcopy(tools)
        return self._run(context)

    def _run(self, context: dict) -> str:
        pieces: list[str] = []
        size = 0
        _budget.start(self.time_limit)
        alarm = _Alarm(self.time_limit * 2)
        try:
            with alarm:
                for piece in self.template.generate(context):
                    size += len(piece)
                    if size > self.output_limit:
                        raise _Limit(f"output longer than {self.output_limit} characters")
                    pieces.append(piece)
        except _Raised as error:
            raise TemplateRaised(self.path, self._line(error), str(error)) from None
        except _Limit as error:
            raise RenderLimitExceeded(self.path, self._line(error), str(error)) from None
        except RecursionError:
            raise RenderLimitExceeded(self.path, None, "recursion too deep") from None
        except jinja2.TemplateError as error:
            message = getattr(error, "message", None) or str(error)
            raise RenderError(self.path, self._line(error), message) from None
        except Exception as error:  # a template can raise anything a Python op can
            message = f"{type(error).__name__}: {error}"
            raise RenderError(self.path, self._line(error), message) from None
        finally:
            _budget.stop()
        return "".join(pieces)

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
    """A backstop for the clock checks: SIGALRM, where this thread may set it."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.armed = False

    def __enter__(self):
        if threading.current_thread() is threading.main_thread() and hasattr(
            signal, "setitimer"
        ):
            self.previous = signal.signal(signal.SIGALRM, self._fire)
            signal.setitimer(signal.ITIMER_REAL, self.seconds)
            self.armed = True
        return self

    def __exit__(self, *exc):
        if self.armed:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self.previous)
        return False

    @staticmethod
    def _fire(signum, frame):
        raise _Limit("time limit exceeded")


def load(path: str, inputs: RenderInputs | None = None) -> ChatTemplate:
    with open(path, encoding="utf-8") as handle:
        source = handle.read()
    return ChatTemplate(source, path, inputs)

__all__ = [
    "BOS_PLACEHOLDER",
    "EOS_PLACEHOLDER",
    "ChatTemplate",
    "RenderError",
    "RenderInputs",
    "RenderLimitExceeded",
    "TemplateRaised",
    "load",
    "make_environment",
]
