"""The build against hostile and unusual templates (issue 12, item 7).

- Resource bombs (``center``, ``%``, ``str.format``, doubling by ``+``, ``extend`` and
  ``~``, values that share one large string) are refused by the sandbox's bound they
  meet (the size checks, or the memory cap), naming the template, line and bound,
  within 1 GB of peak memory for the whole ``python -m compiler build`` (measured in a
  subprocess), and the good template beside them is built. No test here times anything
  (issue 32: on a loaded machine a wall-clock limit fails a build that is right).
- A template's renders share a time budget; past it, the template fails by name.
- The build goes on past a failing template and exits 2 listing every failure; Python's
  nesting limits met while compiling a template (200 nested ``{% if %}``, deep
  parentheses) are that template's error, with its file, not "a compiler bug".
- GBNF generation is linear in a marker's length (a 1,000-character call opener used to
  raise RecursionError).
- Invented templates with a 1,000-character call opener, markers holding U+2028, U+2029
  and U+0085, and a 1,000-character end-of-turn marker build, round-trip through their
  generated parser and their grammars are accepted by llguidance.
"""

from __future__ import annotations

import contextlib
import copy
import os
import re
import resource
import signal
import subprocess
import sys
import tracemalloc
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import pytest

from compiler import model, render
from compiler import spec as specs
from compiler.__main__ import main
from compiler.build import build
from compiler.codegen import gbnf
from compiler.loader import load_generated
from compiler.render import ChatTemplate, RenderLimitExceeded
from compiler.sources import discover
from tests import roundtrip as rt
from tests.steps import lines_run

ROOT = Path(rt.ROOT)
GOOD = (ROOT / "tests" / "invented" / "guillemet_calls.jinja").read_text(encoding="utf-8")
USER = [{"role": "user", "content": "hi"}]

# The acceptance figure for a bomb: the whole build, bomb and good template.
BOMB_BYTES = 1 << 30


@contextmanager
def deadline(seconds: int):
    """Fail a test that runs past ``seconds`` (the code before the fix ran for minutes):
    a guard against a hang, not a limit on speed."""

    def fire(signum, frame):
        raise TimeoutError(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, fire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


# ---------------------------------------------------------------------------------------
# resource bombs, each in a subprocess build beside a good template

# name → (template, the bound that refuses it)
BOMBS = {
    "center": ("{{- 'x'|center(3000000000) -}}", "size"),
    "percent": ("{{- '%03000000000d' % 1 -}}", "size"),
    "format": ("{{- '{:>3000000000}'.format(1) -}}", "size"),
    "list_doubling": (
        "{%- set ns = namespace(l=[1]) -%}"
        "{%- for i in range(64) -%}{%- set ns.l = ns.l + ns.l -%}{%- endfor -%}",
        "size",
    ),
    "extend_doubling": (
        "{%- set l = [1] -%}{%- for i in range(64) -%}{%- set _ = l.extend(l) -%}{%- endfor -%}",
        "size",
    ),
    "tilde_doubling": (
        "{%- set ns = namespace(s='x') -%}"
        "{%- for i in range(64) -%}{%- set ns.s = ns.s ~ ns.s -%}{%- endfor -%}",
        "size",
    ),
    # No operator builds anything large here: 1,000 references to one 1 MB string,
    # printed. The memory cap of the render is what stops it.
    "shared_references": ("{%- set l = ['x' * 1000000] * 1000 -%}{{- l -}}", "memory"),
}
# How the message of each bound begins (compiler.render.RenderLimitExceeded).
BOUND_SAYS = {"size": "size limit: ", "memory": "memory limit exceeded: "}

# Runs the build as `python -m compiler build …` and reports the peak memory of that
# process (its only child).
_MEASURED = (
    "import resource, subprocess, sys\n"
    "code = subprocess.run([sys.executable, '-m', 'compiler', *sys.argv[1:]]).returncode\n"
    "peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss\n"
    "print(f'peak-kib {peak}', file=sys.stderr)\n"
    "sys.exit(code)\n"
)


def _address_space_cap():
    # Keeps a build that ignores its limits (the code before the fix) from taking the
    # machine's memory: it fails with MemoryError at 4 GB instead.
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = 4 << 30 if hard == resource.RLIM_INFINITY else min(4 << 30, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))


def measured_build(templates: Path, out: Path) -> tuple[int, str, int]:
    """(exit code, stderr, peak bytes) of a build in a subprocess."""
    argv = ["build", "--templates", str(templates), "--specs", str(out / "specs"),
            "--generated", str(out / "generated")]  # fmt: skip
    return measured(argv)


def measured(argv: list[str], stdin: str = "") -> tuple[int, str, int]:
    """(exit code, stderr, peak bytes) of `python -m compiler ARGV` (the timeout only
    guards against a hang)."""
    done = subprocess.run(
        [sys.executable, "-c", _MEASURED, *argv],
        cwd=ROOT,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=_address_space_cap,
    )
    lines = done.stderr.splitlines()
    peak = int(lines[-1].split()[1]) * 1024
    return done.returncode, "\n".join(lines[:-1]), peak


@pytest.mark.parametrize("name", list(BOMBS))
def test_a_resource_bomb_is_refused_by_a_bound_naming_the_template(tmp_path, name):
    source, bound = BOMBS[name]
    templates = tmp_path / "templates"
    templates.mkdir()
    bomb = templates / f"bomb_{name}.jinja"
    bomb.write_text("{#- a bomb on line 2 -#}\n" + source + "\n" + GOOD, encoding="utf-8")
    (templates / "good.jinja").write_text(GOOD, encoding="utf-8")
    code, err, peak = measured_build(templates, tmp_path)
    print(f"{name}: peak {peak / 2**20:.0f} MiB")
    assert code == 2, err
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and errors[0].startswith(f"error: {bomb}:2: {BOUND_SAYS[bound]}"), err
    assert "compiler bug" not in err and "MemoryError" not in err
    assert peak < BOMB_BYTES, (peak, err)
    # The good template was built; the bomb left nothing behind.
    generated = sorted(os.listdir(tmp_path / "generated"))
    assert generated == [
        "__init__.py",
        "_runtime.py",
        "good.gbnf",
        "good.py",
        "good.response_template.json",
        "good.tools.gbnf",
    ]
    assert sorted(os.listdir(tmp_path / "specs")) == ["good.yaml"]


@pytest.mark.parametrize(
    "source",
    [
        "{{ 'x'.center(3000000000) }}",
        "{{ 'x'.ljust(3000000000) }}",
        "{{ '%*d' % (3000000000, 1) }}",
        "{{ '%3000000000s'|format(1) }}",
        "{{ '{:>{w}}'.format(1, w=3000000000) }}",
        "{{ '{a:>3000000000}'.format_map({'a': 1}) }}",
        "{{ 'x'|indent(3000000000, true) }}",
        "{{ ('x' * 1000)|replace('x', 'y' * 2000) }}",
        "{{ ('y' * 100000).join(['a' * 1000] * 1000) }}",
        "{{ (['a' * 1000] * 1000)|join('y' * 100000) }}",
        "{{ 'a b'|wordwrap(1, wrapstring='x' * 1000000) }}",
        "{{ [1]|batch(3000000000, 0)|list }}",
        "{{ [1]|slice(3000000000)|list }}",
        "{{ {'a': 1}|tojson(indent=3000000000) }}",
        "{{ lipsum(3000000000) }}",
        "{{ (2 ** 4096) ** 4096 }}",
        "{% set ns = namespace(x=2 ** 4000) %}{% for i in range(20) %}"
        "{% set ns.x = ns.x * ns.x %}{% endfor %}",
    ],
)
def test_wide_values_are_refused_before_they_are_built(source):
    template = ChatTemplate(source, "t.jinja")
    tracemalloc.start()
    try:
        with pytest.raises(RenderLimitExceeded, match=r"^t\.jinja:1: size limit: ") as info:
            template.render(USER)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert info.value.bound == "size"
    assert peak < 64 << 20, (peak, info.value)  # refused, not built and then measured


def test_size_checks_leave_ordinary_values_alone():
    source = (
        "{{ 'ab'|center(6) }}|{{ 'a\nb'|indent(2, true) }}|{{ '%s-%03d'|format('x', 7) }}"
        "|{{ [1, 2]|join(',') }}|{{ 'aXb'|replace('X', 'yy') }}|{{ 'a{}{x}'.format(1, x=2) }}"
        "|{{ 'x'.rjust(3) }}|{{ ','.join(['a', 'b']) }}|{{ 'a' ~ 1 ~ none }}|{{ '%5.1f' % 2.25 }}"
        "|{{ [1, 2, 3]|batch(2, 0)|list }}|{{ 2 ** 10 * 3 }}|{{ [1] + [2] }}"
    )
    assert ChatTemplate(source, "t.jinja").render(USER) == (
        "  ab  |  a\n  b|x-007|1,2|ayyb|a12|  x|a,b|a1None|  2.2|[[1, 2], [3, 0]]|3072|[1, 2]"
    )


# ---------------------------------------------------------------------------------------
# hostile spec files: refused by every command that reads one, by the bound they break
# (depth, values, a marker's length, each named in the error), in one line

SPEC_BYTES = 200 << 20
QWEN_SPEC = (ROOT / "specs" / "qwen_qwen3_0_6b.yaml").read_text(encoding="utf-8")


def _with_variables(lines: str) -> str:
    text = QWEN_SPEC.replace("  variables: {}\n", "  variables:\n" + lines)
    assert text != QWEN_SPEC
    return text


# The line a variable added by _with_variables sits on, counted from the spec's text so a
# longer header does not move what the errors are checked against.
VARIABLE_LINE = QWEN_SPEC.split("  variables: {}\n")[0].count("\n") + 2


def _nested(levels: int) -> str:
    return _with_variables(f"    x: {'[' * levels}{']' * levels}\n")


def _alias_bomb(depth: int, width: int = 10) -> str:
    lines = [f"    a0: &a0 [{', '.join(['lol'] * width)}]\n"]
    for level in range(1, depth + 1):
        lines.append(f"    a{level}: &a{level} [{', '.join([f'*a{level - 1}'] * width)}]\n")
    return _with_variables("".join(lines))


def _call_opener(text: str) -> str:
    spec = QWEN_SPEC.replace('    start: "<tool_call>\\n"\n', f'    start: "{text}"\n')
    assert spec != QWEN_SPEC
    return spec


# Before the bounds: libyaml's composer crashed (SIGSEGV) on the first; the second was a
# RecursionError and the third "too many nested parentheses" compiling the module, both
# "a compiler bug?"; the alias bomb ran for minutes taking gigabytes, as did the marker.
HOSTILE_SPECS = {
    "brackets_100kb": (_nested(50_000), f"line {VARIABLE_LINE} column 37: nested 33 levels deep"),
    "brackets_20000": (_nested(20_000), f"line {VARIABLE_LINE} column 37: nested 33 levels deep"),
    "variables_500_deep": (_nested(500), f"line {VARIABLE_LINE} column 37: nested 33 levels deep"),
    "alias_bomb": (_alias_bomb(5), "more than 10,000 values"),
    "marker_100000": (
        _call_opener("<" * 100_000),
        "tools.call.start: 100,000 characters; a string of the format has at most 1,024",
    ),
}


def _command(command: str, folder: Path, spec: Path) -> tuple[list[str], str]:
    """argv and stdin of one command reading ``spec``."""
    if command == "parse":
        return ["parse", str(spec)], "hello"
    if command == "plugin":
        return ["plugin", "vllm", str(spec), "-o", str(folder / "plugin.py")], ""
    return [command, "--templates", str(folder / "templates"), "--specs", str(spec.parent),
            "--generated", str(folder / "generated")], ""  # fmt: skip


@pytest.mark.parametrize("command", ["parse", "check", "build", "plugin"])
@pytest.mark.parametrize("name", list(HOSTILE_SPECS))
def test_a_hostile_spec_is_refused_by_its_bound_in_one_line(tmp_path, name, command):
    text, problem = HOSTILE_SPECS[name]
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "good.jinja").write_text(GOOD, encoding="utf-8")
    spec = tmp_path / "specs" / "good.yaml"
    spec.parent.mkdir()
    spec.write_text(text, encoding="utf-8")
    argv, stdin = _command(command, tmp_path, spec)
    code, err, peak = measured(argv, stdin)
    print(f"{name} {command}: peak {peak / 2**20:.0f} MiB")
    assert code == 2, err
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    assert errors == [f"error: {spec}: {errors[0][len(f'error: {spec}: '):]}"], err
    assert problem in errors[0]
    assert "compiler bug" not in err
    if command != "build":  # the build's progress line names the template too
        assert err.splitlines() == errors
    assert peak < SPEC_BYTES, (peak, err)
    assert not (tmp_path / "plugin.py").exists()


def _loaded(tmp_path: Path, text: str) -> dict:
    path = tmp_path / "spec.yaml"
    path.write_text(text, encoding="utf-8")
    return specs.load(path)


def test_a_spec_at_the_bounds_loads(tmp_path):
    # The lists are inside the top mapping, render_inputs and variables.
    assert _loaded(tmp_path, _nested(specs.MAX_DEPTH - 3))
    with pytest.raises(specs.SpecLimitError, match="nested 33 levels deep"):
        _loaded(tmp_path, _nested(specs.MAX_DEPTH - 2))
    # Aliases: a2 stands for 1,111 values, a3 for 11,111.
    assert _loaded(tmp_path, _alias_bomb(2))["render_inputs"]["variables"]["a2"][9][9][9] == "lol"
    with pytest.raises(specs.SpecLimitError, match="more than 10,000 values"):
        _loaded(tmp_path, _alias_bomb(3))
    assert _loaded(tmp_path, _call_opener("<" * specs.MAX_MARKER))
    with pytest.raises(specs.SpecLimitError, match="1,025 characters"):
        _loaded(tmp_path, _call_opener("<" * (specs.MAX_MARKER + 1)))


def test_markers_together_are_bounded_and_variables_are_not_markers(tmp_path):
    many = "".join(f"  - {chr(0x4E00 + i) * 1000}\n" for i in range(5))
    text = QWEN_SPEC.replace("  preserved_tokens:\n", "  preserved_tokens:\n" + many)
    with pytest.raises(specs.SpecLimitError, match=r"grammar\.preserved_tokens\.3: the format's"):
        _loaded(tmp_path, text)
    assert _loaded(tmp_path, _with_variables(f"    date: {'x' * 100_000}\n"))


def test_an_override_over_the_bounds_fails_its_template(tmp_path):
    value = "<" * 2000
    spec = tmp_path / "specs" / "good.yaml"
    spec.parent.mkdir()
    spec.write_text(
        f"overrides:\n- path: tools.call.end\n  value: '{value}'\n  reason: hostile\n",
        encoding="utf-8",
    )
    (tmp_path / "good.jinja").write_text(GOOD, encoding="utf-8")
    report = build(discover(str(tmp_path)), str(spec.parent), str(tmp_path / "out"),
                   log=lambda message: None)  # fmt: skip
    assert report.failures == [
        f"{spec}: tools.call.end: 2,000 characters; a string of the format has at most 1,024"
    ]


def test_an_override_path_deeper_than_a_spec_is_refused():
    def override(steps: int) -> dict:
        return {"path": ".".join(["a"] * steps), "value": 1, "reason": "deep"}

    patched, _ = specs.apply_overrides({}, [override(specs.MAX_DEPTH)], "o.yaml")
    assert len(str(patched)) > specs.MAX_DEPTH
    with pytest.raises(specs.SpecLimitError, match=r"^o\.yaml: overrides\.0\.path: 5,000 steps"):
        specs.apply_overrides({}, [override(5_000)], "o.yaml")


@pytest.mark.parametrize(
    "value, problem",
    [
        (":".join(["1"] * 30_000), f"line {VARIABLE_LINE} column 8: a number of 59,999 characters"),
        ("1" * 5000, f"line {VARIABLE_LINE} column 8: a number of 5,000 characters"),
        ("!!int abc", "invalid value: invalid literal for int()"),
    ],
)
def test_numbers_are_bounded(tmp_path, value, problem):
    with pytest.raises(specs.SpecError, match=re.escape(problem)):
        _loaded(tmp_path, _with_variables(f"    n: {value}\n"))


# ---------------------------------------------------------------------------------------
# the time budget of a template's renders

# About 300,000 clock readings a render (one per loop iteration); the whole analysis of
# GOOD reads the clock about 300 times.
SLOW = "{% for i in range(300) %}{% for j in range(1000) %}{% endfor %}{% endfor %}slow"


@pytest.fixture
def counted_clock(monkeypatch):
    """The sandbox's clock made a count of its readings, a microsecond each: a budget
    becomes a number of steps (a loop's iteration, a call), the same on a loaded
    machine as on an idle one. The backstop that counts CPU time is off: it would
    take the counted seconds for CPU seconds (these renders come back to the clock
    checks at every step, which is what the backstop is not for)."""
    readings = 0

    def monotonic() -> float:
        nonlocal readings
        readings += 1
        return readings * 1e-6

    monkeypatch.setattr(render, "time", SimpleNamespace(monotonic=monotonic))
    monkeypatch.setattr(render, "_Alarm", lambda seconds: contextlib.nullcontext())


def test_renders_share_a_time_budget(counted_clock):
    template = ChatTemplate(SLOW, "slow.jinja", time_budget=3.0)
    done = 0
    with pytest.raises(RenderLimitExceeded, match=r"^slow\.jinja(:\d+)?: time budget exceeded"):
        for _ in range(200):
            assert template.render(USER) == "slow"
            done += 1
    # Each render fits the budget; together they run past it, and then no more run.
    assert done >= 1
    with pytest.raises(RenderLimitExceeded, match=r"^slow\.jinja: time budget exceeded") as info:
        template.render(USER)
    assert info.value.bound == "time"


def test_a_template_over_its_budget_fails_and_the_others_build(tmp_path, counted_clock):
    (tmp_path / "slow.jinja").write_text(SLOW + "\n" + GOOD, encoding="utf-8")
    (tmp_path / "good.jinja").write_text(GOOD, encoding="utf-8")
    report = build(discover(str(tmp_path)), str(tmp_path / "specs"), str(tmp_path / "out"),
                   log=lambda message: None, time_budget=3.0)  # fmt: skip
    assert len(report.failures) == 1, report.failures
    assert report.failures[0].startswith(str(tmp_path / "slow.jinja"))
    assert "time budget exceeded" in report.failures[0]
    assert (tmp_path / "out" / "good.py").exists()


# ---------------------------------------------------------------------------------------
# the build goes on past failures; compile-time limits name the template

BROKEN = {
    "nested_ifs.jinja": "{% if true %}" * 200 + "x" + "{% endif %}" * 200,
    "deep_parentheses.jinja": "line one\nline two\n{{ " + "(" * 1000 + "1" + ")" * 1000 + " }}\n",
    "syntax.jinja": "{% for m in messages %}\n{{ m.content }\n",
}


def test_build_goes_on_past_failures_and_lists_them(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "templates").mkdir()
    for name, text in BROKEN.items():
        (tmp_path / "templates" / name).write_text(text, encoding="utf-8")
    (tmp_path / "templates" / "good.jinja").write_text(GOOD, encoding="utf-8")
    code = main(["build", "--templates", "templates", "--specs", "specs", "--generated", "out"])
    out, err = capsys.readouterr()
    assert code == 2
    assert "Traceback" not in err and "compiler bug" not in err
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    assert errors == [
        "error: templates/deep_parentheses.jinja:3: cannot be compiled: nested too deeply "
        "(Python's recursion limit)",
        "error: templates/nested_ifs.jinja:1: cannot be compiled: too many levels of "
        "indentation (a limit of Python's on nesting)",
        "error: templates/syntax.jinja:2: unexpected '}'",
    ]
    assert err.splitlines()[-1] == errors[-1]
    assert out == "4 templates: 3 failed, 1 specs and 6 generated files changed, 0 warnings\n"
    assert sorted(os.listdir("out")) == [
        "__init__.py",
        "_runtime.py",
        "good.gbnf",
        "good.py",
        "good.response_template.json",
        "good.tools.gbnf",
    ]


# ---------------------------------------------------------------------------------------
# GBNF generation linear in a marker's length

HERMES = "nousresearch_hermes_2_pro_llama_3_8b_tool_use"


def prose(length: int, head: str = "<call ", tail: str = ">") -> str:
    """Template prose of ``length`` characters, as a marker that swallowed some."""
    words = "the tool call begins here with plain words and marks | ; # @ ( ) 12".split()
    text, index = head, 0
    while len(text) < length - len(tail):
        text += words[index % len(words)] + " "
        index += 1
    return text[: length - len(tail)] + tail


def format_with_opener(opener: str) -> model.Format:
    spec = copy.deepcopy(specs.load(str(ROOT / "specs" / f"{HERMES}.yaml")))
    spec["tools"]["call"]["start"] = opener + "\n"
    spec["grammar"]["triggers"] = [{"type": "word", "value": opener}]
    return model.build(spec, slug="long", origin="long.yaml")


def grammars(fmt: model.Format) -> int:
    """The characters of every grammar of ``fmt``."""
    texts = [gbnf.build(fmt, enable_thinking=True), gbnf.build_tool_calls(fmt) or ""]
    return sum(map(len, texts))


def test_gbnf_generation_is_linear_in_the_call_opener():
    """The work counted in lines of Python run (tests/steps.py): about 10x for a 10x
    longer opener (0.57 and 5.7 million lines); a quadratic step would be 100x."""
    short, long = format_with_opener(prose(1_000)), format_with_opener(prose(10_000))
    with deadline(120):
        short_lines, long_lines = lines_run(grammars, short), lines_run(grammars, long)
    print(f"1,000: {short_lines:,} lines; 10,000: {long_lines:,} lines")
    assert grammars(long) < 12 * grammars(short)
    assert long_lines < 15 * short_lines, (short_lines, long_lines)


def test_without_is_exact_for_a_long_periodic_stop():
    """The automaton stays exact where a long stop repeats itself (deep fallbacks)."""
    stop = "ab" * 500 + "c"
    lines = gbnf.without("body", stop, closed="body-closed")
    grammar = "root ::= body-closed\n" + "\n".join(lines) + "\n"
    text = "ab" * 700 + "x" + "ab" * 499 + "a" + "ab" * 500 + "c"
    assert text.endswith(stop) and text.find(stop) == len(text) - len(stop)
    assert accepts(grammar, text)
    assert not accepts(grammar, stop + "x" + stop)


# ---------------------------------------------------------------------------------------
# invented templates: long markers and line separators

INVENTED = r"""{#- Invented: calls as OPENER{json}CLOSER, each turn ended by EOT. -#}
{%- set opener = OPENER -%}
{%- set closer = CLOSER -%}
{%- set eot = EOT -%}
{%- for message in messages -%}
    {%- if message.role == 'assistant' -%}
        {{- '[[assistant]]\n' -}}
        {%- if message.content -%}
            {{- message.content -}}
        {%- endif -%}
        {%- for call in message.tool_calls or [] -%}
            {%- set fn = call.function if call.function is defined else call -%}
            {%- if message.content or not loop.first -%}
                {{- '\n' -}}
            {%- endif -%}
            {{- opener + '{"name": "' + fn.name + '", "arguments": ' -}}
            {{- fn.arguments if fn.arguments is string else fn.arguments | tojson -}}
            {{- '}' + closer -}}
        {%- endfor -%}
        {{- eot + '\n' -}}
    {%- elif message.role == 'system' -%}
        {{- '[[system]]\n' + message.content -}}
        {%- if tools -%}
            {{- '\nTools: ' + tools | tojson -}}
        {%- endif -%}
        {{- eot + '\n' -}}
    {%- else -%}
        {{- '[[' + message.role + ']]\n' + message.content + eot + '\n' -}}
    {%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{- '[[assistant]]\n' -}}
{%- endif -%}
"""

# slug -> (call opener, call closer, end-of-turn marker)
MARKERS = {
    "robust_long_opener": (prose(1_000), "</call>", "<|end|>"),
    "robust_separators": ("<call\u2028>", "</call\u2029>", "<|end\u0085|>"),
    "robust_separators_edge": ("\u2028<call\u0085>\u2029", "\u2029</call\u2028>", "<|end|>\u0085"),
    "robust_long_end": ("<call>", "</call>", "<|" + "e" * 996 + "|>"),
}


def _jinja_string(text: str) -> str:
    assert "'" not in text and "\\" not in text
    return "'" + text + "'"


@pytest.fixture(scope="module")
def invented(tmp_path_factory):
    """The invented templates built into a tmp dir: (dir, report, parsers by slug)."""
    out = tmp_path_factory.mktemp("robust")
    (out / "templates").mkdir()
    for slug, (opener, closer, eot) in MARKERS.items():
        text = (INVENTED.replace("OPENER", _jinja_string(opener))
                .replace("CLOSER", _jinja_string(closer)).replace("EOT", _jinja_string(eot)))  # fmt: skip
        (out / "templates" / f"{slug}.jinja").write_text(text, encoding="utf-8")
    with deadline(120):
        report = build(discover(str(out / "templates")), str(out / "specs"),
                       str(out / "generated"), log=lambda message: None)  # fmt: skip
    parsers = {}
    for slug in MARKERS:
        parsers[slug] = load_generated(out / "generated", slug)
    return out, report, parsers


def test_invented_templates_build(invented):
    out, report, parsers = invented
    assert report.failures == []
    # Markers over 64 characters are reported for review, and kept.
    assert all("marker of 1000 characters" in warning for warning in report.warnings)
    assert {warning.split(":")[0] for warning in report.warnings} == {
        str(out / "specs" / "robust_long_end.yaml"),
        str(out / "specs" / "robust_long_opener.yaml"),
    }
    opener, closer, eot = MARKERS["robust_long_opener"]
    assert parsers["robust_long_opener"].TRIGGERS == [{"type": 1, "value": opener}]
    # The long end-of-turn marker is recognised, not dropped.
    # (then the headers of the messages that may follow a turn: no tokenizer)
    assert parsers["robust_long_end"].STOP[0] == MARKERS["robust_long_end"][2]
    assert parsers["robust_separators"].STOP[0] == "<|end\u0085|>"
    assert parsers["robust_separators"].TRIGGERS == [{"type": 1, "value": "<call\u2028>"}]


@pytest.mark.parametrize("slug", list(MARKERS))
def test_invented_template_round_trips_and_its_grammars_accept(invented, monkeypatch, slug):
    out, _, parsers = invented
    monkeypatch.setattr(rt, "SPECS", str(out / "specs"))
    parser = parsers[slug]
    trigger = parser.TRIGGERS[0]["value"]
    checked = 0
    for kind in rt.ALL_KINDS:
        case = rt.build_case(slug, kind)
        if case is None:
            continue
        passed, why = rt.check(case, parser.parse)
        assert passed, (kind.name, why)
        # Tool names unrestricted here (one large grammar to compile, not one per tool
        # set); the calls' grammar below restricts them.
        whole = parser.grammar(enable_thinking=kind.enable_thinking)
        for text in (case.text, case.text + parser.STOP[0]):
            assert accepts(whole, text), (kind.name, text, why_rejected(whole, text))
        if kind.calls:
            calls = case.text[case.text.index(trigger) :]
            tools_grammar = parser.tool_call_grammar(tools=case.tools)
            assert accepts(tools_grammar, calls), (kind.name, why_rejected(tools_grammar, calls))
        checked += 1
    assert checked >= 7


def test_long_end_marker_ends_the_turn(invented):
    _, _, parsers = invented
    parser, eot = parsers["robust_long_end"], MARKERS["robust_long_end"][2]
    message = parser.parse("It is 42." + eot)
    assert message["content"] == "It is 42."
    assert parser.parse("It is 42." + eot[:-1])["content"] == "It is 42." + eot[:-1]


# ---------------------------------------------------------------------------------------
# llguidance, one token per byte (as tests/test_grammar.py), imported where used

_MATCHERS: dict[str, object] = {}


def _matcher(grammar: str):
    llguidance = pytest.importorskip("llguidance")
    from tests.test_grammar import TOKENIZER  # one token per byte

    if grammar not in _MATCHERS:
        compiled = llguidance.grammar_from("gbnf", grammar)
        matcher = llguidance.LLMatcher(TOKENIZER, compiled, log_level=0)
        assert not matcher.is_error(), matcher.get_error()
        _MATCHERS[grammar] = matcher
    return _MATCHERS[grammar].deep_copy()  # type: ignore[attr-defined]


def accepts(grammar: str, text: str) -> bool:
    matcher = _matcher(grammar)
    data = list(text.encode("utf-8"))
    if matcher.try_consume_tokens(data) != len(data):
        return False
    from tests.test_grammar import EOS

    return matcher.is_accepting() and matcher.consume_token(EOS)


def why_rejected(grammar: str, text: str) -> str:
    matcher = _matcher(grammar)
    for at, byte in enumerate(text.encode("utf-8")):
        if not matcher.consume_token(byte):
            return f"byte {at}: {matcher.get_error()[:300]}"
    return "all bytes consumed, but the grammar cannot end there"
