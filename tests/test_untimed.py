"""No test compares a measured duration with a limit (issue 32).

The machine that runs the suite is shared: at a load of 8-10 on two cores, eight tests
failed on a wall-clock limit alone (a build in under 10 s, a parse in under a second).
A test bounds steps, sizes, CPU time the sandbox enforces, or memory; timing is
``make bench``'s. This test reads every Python file under ``tests/`` (the benchmarks
aside: timing them is their job) and finds, inside an ``assert``:

- a value read off a clock (``time.time``, ``perf_counter``, ``monotonic``,
  ``process_time``, their ``_ns`` forms, ``timeit``), or anything computed from one —
  a difference, a ratio, a list it was appended to, a function that returns it, one
  item of a tuple such a function returns — compared by order with anything;
- a value whose name says it is a duration (``elapsed``, ``seconds``, ``took``,
  ``spent``, ``duration``, ``…_time``) compared by order with anything;

and, anywhere, a timeout shorter than a minute written as a number (``timeout=``,
``join(…)``, ``wait(…)``, ``signal.alarm(…)``): a timeout may guard against a hang,
far above any normal run, but is no limit on speed.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Iterator

import pytest

TESTS = Path(__file__).resolve().parent
SKIPPED = {TESTS / "benchmarks"}  # timing is what the benchmarks do

CLOCKS = {
    "time",
    "time_ns",
    "perf_counter",
    "perf_counter_ns",
    "monotonic",
    "monotonic_ns",
    "process_time",
    "process_time_ns",
    "thread_time",
    "thread_time_ns",
    "default_timer",  # timeit's
    "timeit",
    "repeat",  # timeit.repeat
}
CLOCK_MODULES = {"time", "timeit"}
# Calls whose result carries the taint of their arguments.
PASSING = {
    "min",
    "max",
    "sum",
    "sorted",
    "abs",
    "float",
    "int",
    "round",
    "list",
    "tuple",
}
DURATION_WORDS = ("elapsed", "seconds", "secs", "took", "spent", "duration", "timing")
ORDER = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)
SHORTEST_TIMEOUT = 60.0  # seconds: far above any normal run; a guard against a hang
TIMEOUT_CALLS = {"join", "wait", "alarm", "communicate"}

# A taint: False (not timed), True (timed), or a tuple of taints, one per item.
Taint = bool | tuple


def _any(taint: Taint) -> bool:
    return any(map(_any, taint)) if isinstance(taint, tuple) else bool(taint)


def _join(*taints: Taint) -> Taint:
    shapes = {len(taint) for taint in taints if isinstance(taint, tuple)}
    if len(shapes) == 1 and all(
        isinstance(taint, tuple) or not taint for taint in taints
    ):
        size = shapes.pop()
        items = [
            taint if isinstance(taint, tuple) else (False,) * size for taint in taints
        ]
        return tuple(_join(*column) for column in zip(*items, strict=True))
    return any(map(_any, taints))


def _name_of(node: ast.AST) -> str | None:
    """The name a value is read by: a variable, an attribute, a string key."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        key = node.slice.value
        return key if isinstance(key, str) else _name_of(node.value)
    if isinstance(node, ast.Subscript):
        return _name_of(node.value)
    return None


def _says_duration(node: ast.AST) -> bool:
    name = (_name_of(node) or "").lower()
    return any(word in name for word in DURATION_WORDS) or name.endswith("_time")


class _Module:
    """The timed values of one module: names, and functions by what they return.

    One scope for the whole module (a closure writes ``outcome["elapsed"]`` that its
    caller asserts on); read to a fixed point, so order does not matter.
    """

    def __init__(self, tree: ast.Module):
        self.tree = tree
        self.clocks: set[str] = set()
        self.names: dict[str, Taint] = {}
        self.functions: dict[str, Taint] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module in CLOCK_MODULES:
                self.clocks |= {
                    alias.asname or alias.name for alias in node.names
                } & CLOCKS
        changed = True
        while changed:
            changed = False
            for node in ast.walk(tree):
                changed |= self._learn(node)

    def taint(self, node: ast.AST | None) -> Taint:
        if node is None:
            return False
        if isinstance(node, ast.Call):
            func = node.func
            if (
                isinstance(func, ast.Attribute)
                and isinstance(func.value, ast.Name)
                and func.value.id in CLOCK_MODULES
                and func.attr in CLOCKS
            ):
                return True
            if isinstance(func, ast.Name) and func.id in self.clocks:
                return True
            if isinstance(func, ast.Name) and func.id in self.functions:
                return self.functions[func.id]
            if isinstance(func, ast.Name) and func.id in PASSING:
                return _join(False, *map(self.taint, node.args))
            if isinstance(func, ast.Attribute) and func.attr == "get":
                return self.taint(func.value)
            return False
        if isinstance(node, ast.Name):
            return self.names.get(node.id, False)
        if isinstance(node, ast.Tuple | ast.List):
            return tuple(self.taint(item) for item in node.elts)
        if isinstance(node, ast.Subscript):
            whole = self.taint(node.value)
            index = node.slice
            if isinstance(whole, tuple) and isinstance(index, ast.Constant):
                if isinstance(index.value, int) and -len(whole) <= index.value < len(
                    whole
                ):
                    return whole[index.value]
            return _any(whole)
        if isinstance(node, ast.GeneratorExp | ast.ListComp | ast.SetComp):
            return self.taint(node.elt)
        if isinstance(node, ast.Starred):
            return self.taint(node.value)
        if isinstance(node, ast.Attribute):
            return _any(self.taint(node.value)) or self.names.get(
                "." + node.attr, False
            )
        return any(_any(self.taint(child)) for child in ast.iter_child_nodes(node))

    def _mark(self, target: ast.AST, taint: Taint) -> bool:
        """Record that ``target`` holds ``taint``; whether that was news."""
        if isinstance(target, ast.Tuple | ast.List):
            items = (
                taint
                if isinstance(taint, tuple) and len(taint) == len(target.elts)
                else (_any(taint),) * len(target.elts)
            )
            return any(
                [
                    self._mark(item, part)
                    for item, part in zip(target.elts, items, strict=True)
                ]
            )
        if isinstance(target, ast.Starred):
            return self._mark(target.value, _any(taint))
        if not _any(taint):
            return False
        if isinstance(target, ast.Name):
            key = target.id
        elif isinstance(target, ast.Attribute):
            key = "." + target.attr  # self.seconds = …: read back as x.seconds
        elif isinstance(target, ast.Subscript):
            return self._mark(target.value, True)
        else:
            return False
        old = self.names.get(key, False)
        new = _join(old, taint) if old else taint
        self.names[key] = new
        return new != old

    def _learn(self, node: ast.AST) -> bool:
        if isinstance(node, ast.Assign):
            taint = self.taint(node.value)
            return any([self._mark(target, taint) for target in node.targets])
        if isinstance(node, ast.AugAssign | ast.AnnAssign):
            return self._mark(node.target, self.taint(node.value))
        if isinstance(node, ast.For | ast.comprehension):
            return self._mark(node.target, _any(self.taint(node.iter)))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in ("append", "extend", "add", "insert", "update"):
                if any(_any(self.taint(arg)) for arg in node.args):
                    return self._mark(node.func.value, True)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            returned: list[Taint] = [
                self.taint(inner.value)
                for inner in ast.walk(node)
                if isinstance(inner, ast.Return) and inner.value is not None
            ]
            taint = _join(False, *returned) if returned else False
            if _any(taint) and self.functions.get(node.name) != taint:
                self.functions[node.name] = taint
                return True
        return False


def _number(node: ast.AST) -> float | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        if not isinstance(node.value, bool):
            return float(node.value)
    return None


def timed_comparisons(source: str) -> Iterator[tuple[int, str]]:
    """(line, why) for every duration compared with a limit, and every short timeout."""
    tree = ast.parse(source)
    module = _Module(tree)
    for statement in ast.walk(tree):
        if isinstance(statement, ast.Assert):
            for node in ast.walk(statement.test):
                if not isinstance(node, ast.Compare):
                    continue
                sides = [node.left, *node.comparators]
                for operator, left, right in zip(
                    node.ops, sides, sides[1:], strict=False
                ):
                    if not isinstance(operator, ORDER):
                        continue
                    for side in (left, right):
                        if _any(module.taint(side)):
                            why = "a time read off a clock"
                        elif _says_duration(side):
                            why = "a value named as a duration"
                        else:
                            continue
                        yield node.lineno, f"{why} compared with a limit: {ast.unparse(node)}"
                        break
        if isinstance(statement, ast.Call):
            for keyword in statement.keywords:
                seconds = _number(keyword.value)
                if keyword.arg == "timeout" and seconds is not None:
                    if seconds < SHORTEST_TIMEOUT:
                        yield statement.lineno, f"a timeout of {seconds:g} s"
            func = statement.func
            called = (
                func.attr
                if isinstance(func, ast.Attribute)
                else getattr(func, "id", "")
            )
            if called in TIMEOUT_CALLS and statement.args:
                seconds = _number(
                    statement.args[-1] if called == "alarm" else statement.args[0]
                )
                # alarm(0) cancels an alarm: no timeout at all.
                if seconds is not None and 0 < seconds < SHORTEST_TIMEOUT:
                    yield statement.lineno, f"{called}({seconds:g}): a timeout of {seconds:g} s"


def python_files() -> list[Path]:
    return sorted(
        path
        for path in TESTS.rglob("*.py")
        if not any(skipped in path.parents for skipped in SKIPPED)
    )


def test_no_test_compares_a_duration_with_a_limit():
    found = [
        f"{path.relative_to(TESTS.parent)}:{line}: {why}"
        for path in python_files()
        for line, why in timed_comparisons(path.read_text(encoding="utf-8"))
    ]
    assert not found, "\n".join(found)


# The shapes the tests on main had when this test was written (a43efc7), each as it was
# written there, and shapes like them; every one is found.
TIMED = {
    "a difference asserted": (
        "start = time.monotonic()\nwork()\nelapsed = time.monotonic() - start\n"
        "assert elapsed < 4.0\n"
    ),
    "a difference in the assert": (
        "started = time.monotonic()\nwork()\nassert time.monotonic() - started < 2, info\n"
    ),
    "a closure's key": (
        "outcome = {}\ndef work():\n    start = time.monotonic()\n"
        "    outcome['elapsed'] = time.monotonic() - start\n"
        "assert outcome['elapsed'] < 4.0\n"
    ),
    "a list of times": (
        "from time import perf_counter\ntimes = []\nfor _ in range(3):\n"
        "    start = perf_counter()\n    run()\n    times.append(perf_counter() - start)\n"
        "assert min(times) < 1.0, times\n"
    ),
    "one item of a returned tuple": (
        "def measured(argv):\n    started = time.monotonic()\n    done = run(argv)\n"
        "    seconds = time.monotonic() - started\n    return done.returncode, seconds, 3\n"
        "code, took, peak = measured([])\nassert code == 2\nassert took < LIMIT\n"
    ),
    "a ratio of CPU times": (
        "def best(f):\n    start = time.process_time()\n    f()\n"
        "    return time.process_time() - start\n"
        "small, large = (best(f) for f in (a, b))\nassert large / small <= LIMIT\n"
    ),
    "a generator of returned tuples": (
        "def grammars(fmt):\n    started = time.perf_counter()\n    texts = make(fmt)\n"
        "    return time.perf_counter() - started, len(texts)\n"
        "short = min(grammars(a)[0] for _ in range(3))\n"
        "long, size = min(grammars(b) for _ in range(2))\n"
        "assert long < 30 * short + 0.5\n"
    ),
    "a duration by its name": "assert template.spent < 0.5 + 1.0\n",
    "a timer's attribute": (
        "class timed:\n    def __exit__(self, *exc):\n"
        "        self.seconds = time.perf_counter() - self.began\n"
        "assert timer.seconds < 3\n"
    ),
    "a short timeout": "subprocess.run(argv, timeout=10)\n",
    "a short join": "thread.join(10.0)\n",
    "a short alarm": "signal.alarm(5)\n",
}


@pytest.mark.parametrize("name", list(TIMED))
def test_a_timed_assertion_is_found(name):
    assert list(timed_comparisons(TIMED[name])), name


UNTIMED = {
    "a count": "steps = count(text)\nassert steps <= 4 * len(text)\n",
    "an untimed item of a timed tuple": (
        "def measured(argv):\n    started = time.monotonic()\n"
        "    return run(argv), time.monotonic() - started\n"
        "code, seconds = measured([])\nassert code == 2\nprint(seconds)\n"
    ),
    "a time printed, not compared": (
        "start = time.perf_counter()\nwork()\nprint(time.perf_counter() - start)\n"
    ),
    "a limit's setting compared for equality": "assert template.time_limit == 5.0\n",
    "a hang guard": "subprocess.run(argv, timeout=120)\nthread.join(60)\nsignal.alarm(600)\n",
    "a timeout in a tool's arguments": "arguments = {'timeout': 5}\nassert arguments['timeout'] == 5\n",
}


@pytest.mark.parametrize("name", list(UNTIMED))
def test_an_untimed_assertion_is_left_alone(name):
    assert not list(timed_comparisons(UNTIMED[name])), name
