"""Linear time on every input: pathological texts of 10 KB, 100 KB and 1 MB, placed
inside each part of every format, read by ``parse`` and by ``StreamParser`` fed in
4-character chunks. Prints the growth of the time per 10x of input (best of three
runs at least); every figure must stay at or under 15x (``--check`` exits 1 otherwise).

The time is the process's CPU time: on a machine shared with other work, the wall
clock also counts the spells the process waits for a CPU, which have nothing to do
with the input. A reading over the limit is measured again (RETRIES more rounds, the
best time of every round kept for each size), so that one slow spell at the small
size does not fail the check; one still over it is measured again once the formats
are done, alone (two measuring processes share the caches of a two-CPU machine).
Growth that is the reader's own shows in every round and stays over the limit.

    python -m tests.benchmarks.linear [--check] [--json] [--only SLUG ...] [--inputs NAME ...]

The places are cut from the text the template itself renders for one call (the
round trip's ``tool_call`` case): the content before any marker, inside a reasoning
block, where the call's name goes, inside its arguments before a key, and inside a
string value. A format without reasoning or calls has fewer places. In the content
only, the inputs also include repeated failed mentions of the call trigger, and the
same with the template's call after them; and each way the format opens a call,
repeated with nothing, a space or the start of a name after it (``openings``). Apart
from the texts, the grammars a request's tools make are timed as they grow
(``GRAMMAR_INPUTS``): one tool with 800 and 8,000 properties (``tool_call_grammar``),
2,000 and 20,000 tools (``lark_grammar``); the larger must also take at most
``GRAMMAR_SECONDS``.
"""

from __future__ import annotations

import argparse
import gc
import json
import multiprocessing
import sys
import time
from functools import partial
from typing import Callable

from tests import roundtrip as rt

SIZES = (10_000, 100_000, 1_000_000)
LIMIT = 15.0
REPEATS = 3
# A size is timed REPEATS times at least, and more while the runs take less than
# this many seconds all told: a run of a few milliseconds is easily slowed by half
# by the machine, and the best of a few dozen is not.
SPAN = 0.05
RETRIES = 3


def payloads(spec: dict) -> dict[str, Callable[[int], str]]:
    """Pathological texts by name: each a function of the length wanted."""
    markers = [m for m in _markers(spec) if len(m) > 1]
    partial = (markers[0][:-1] if markers else "<tool") or "<"

    def repeat(unit: str):
        return lambda n: (unit * (n // len(unit) + 1))[:n]

    return {
        "nesting": repeat("["),
        "objects": repeat('{"a": '),
        "angles": repeat("<"),
        "partial_marker": repeat(partial),
        "open_string": lambda n: '"' + "x" * (n - 1),
        "whitespace": repeat(" \n\t"),
    }


def mentions(slug: str) -> dict[str, Callable[[int], str]]:
    """Texts of repeated failed mentions of the format's call trigger (in prose, each
    failing quickly), without and with a real call (the template's) at the end;
    placed in the content only. A bare-call format has no trigger: its mention is
    the opening of the call the template writes."""
    module = rt.module(slug)
    cases = (rt.make_case(slug, kind) for kind in rt.TOOL_KINDS if not kind.content)
    case = next((case for case in cases if case is not None), None)
    trigger = getattr(module, "TRIGGER", "").strip()
    if not trigger and case is not None:
        trigger = case.text.strip()[:12]
    if not trigger:
        return {}
    unit = "Quoted: " + trigger + " is how a call starts.\n"

    def repeat(n: int) -> str:
        return unit * max(1, n // len(unit))

    found: dict[str, Callable[[int], str]] = {"mentions": repeat}
    if case is not None:
        call = case.text
        found["mentions_call"] = lambda n: repeat(n - len(call)) + call
    return found


def openings(slug: str) -> dict[str, Callable[[int], str]]:
    """Texts of one way the format opens a call, repeated: the section's opener
    and the call's (SPEC), or the section's and each other call opener real
    outputs write, each followed by nothing (``opener``), a space
    (``opener_space``) or the start of a name (``opener_name``: after what the
    template writes between the opener and the name); ``opener2``... for the
    other openers. Every one is a try at calls that fails a few characters on. A
    format that marks no call has none (its ``mentions`` open bare calls)."""
    tools = rt.load_spec(slug)["tools"]
    call = tools.get("call") or {}
    section = (tools.get("section") or {}).get("start") or ""
    starts = [call.get("start") or ""] + list(call.get("start_also") or ())
    if not (section + starts[0]).strip():
        return {}
    between = ""  # what the template writes from its opener to the name
    anchor = (section + starts[0]).strip()
    for kind in rt.TOOL_KINDS:
        case = rt.make_case(slug, kind)
        name = case.text.find("get_weather") if case is not None else -1
        at = case.text.rfind(anchor, 0, name) if case is not None and name >= 0 else -1
        if at >= 0:
            between = case.text[at + len(anchor) : name].lstrip()
            break
    found: dict[str, Callable[[int], str]] = {}
    for number, start in enumerate(starts, 1):
        label = "opener" if number == 1 else f"opener{number}"
        for suffix, after in (("", ""), ("_space", " "), ("_name", between + "get_wea")):
            unit = section + start + after
            found[label + suffix] = partial(_repeated, unit)
    return found


def _repeated(unit: str, n: int) -> str:
    return (unit * (n // len(unit) + 1))[:n]


def _markers(spec: dict) -> list[str]:
    found: list[str] = []
    tools = spec["tools"]
    for value in (
        (spec["reasoning"].get("start") or ""),
        (tools.get("section") or {}).get("start") or "",
        (tools.get("call") or {}).get("start") or "",
    ):
        if value.strip():
            found.append(value.strip())
    return found + list(spec["end_of_turn"]["markers"])


def places(slug: str) -> dict[str, str]:
    """Where a payload goes, as the text written before it."""
    found = {"content": ""}
    spec = rt.load_spec(slug)
    reasoning = rt.make_case(slug, rt.TOOL_KINDS[-1])
    if reasoning is not None and spec["reasoning"]["mode"] != "none":
        at = reasoning.text.find("The user wants")
        if at >= 0:
            found["reasoning"] = reasoning.text[:at]
    case = rt.make_case(slug, rt.TOOL_KINDS[0])
    if case is not None:
        text = case.text
        name, key, value = text.find("get_weather"), text.find("city"), text.find("Tokyo")
        if name >= 0:
            found["name"] = text[:name]
        if name >= 0 and key > name:
            # Where the arguments begin: their object's brace, else before the key.
            brace = text.rfind("{", name, key)
            found["arguments"] = text[: brace if brace >= 0 else key]
        if value >= 0:
            found["value"] = text[:value]
    return found


def _best(function) -> float:
    """The best CPU time of REPEATS runs at least (more while they last under SPAN
    seconds all told), with the garbage collector off as timeit has it (its passes
    over whatever else the process holds would be timed too)."""
    best = float("inf")
    spent = 0.0
    runs = 0
    gc.collect()
    gc.disable()
    try:
        while runs < REPEATS or spent < SPAN:
            start = time.process_time()
            function()
            took = time.process_time() - start
            best, spent, runs = min(best, took), spent + took, runs + 1
    finally:
        gc.enable()
    return best


def _streamed(module, text: str) -> None:
    parser = module.StreamParser()
    for at in range(0, len(text), 4):
        parser.feed(text[at : at + 4])
    parser.finish()


def _growth(figures: list[float]) -> float:
    """The largest growth per 10x. Below a millisecond, the clock and the per-call
    cost dominate: growth is measured from there on."""
    floor = [max(t, 1e-3) for t in figures]
    return max(floor[i + 1] / floor[i] for i in range(len(floor) - 1))


def _reader(module, reader: str):
    if reader == "parse":
        return module.parse
    return lambda text: _streamed(module, text)


def _improved(read, texts: list[str], figures: list[float]) -> tuple[list[float], int]:
    """``figures`` measured again while their growth is over the limit (RETRIES
    rounds at most), each size's best kept; and the rounds taken."""
    retries = 0
    while _growth(figures) > LIMIT and retries < RETRIES:
        again = [_best(partial(read, text)) for text in texts]
        figures = [min(pair) for pair in zip(figures, again, strict=True)]
        retries += 1
    return figures, retries


def _texts(slug: str, place: str, name: str) -> list[str]:
    module = rt.module(slug)
    made = payloads(module.SPEC)
    if place == "content":
        made.update(mentions(slug))
        made.update(openings(slug))
    return [places(slug)[place] + made[name](size) for size in SIZES]


def measure(slug: str, inputs: tuple[str, ...] = ()) -> list[dict]:
    module = rt.module(slug)
    rows = []
    for place, before in places(slug).items():
        made = payloads(module.SPEC)
        if place == "content":
            made.update(mentions(slug))
            made.update(openings(slug))
        for name, make in made.items():
            if inputs and name not in inputs:
                continue
            texts = [before + make(size) for size in SIZES]
            for reader in ("parse", "stream"):
                read = _reader(module, reader)
                figures = [_best(partial(read, text)) for text in texts]
                figures, retries = _improved(read, texts, figures)
                rows.append(
                    {
                        "slug": slug,
                        "place": place,
                        "input": name,
                        "reader": reader,
                        "seconds": figures,
                        "growth": _growth(figures),
                        "retries": retries,
                    }
                )
    return rows


def measure_alone(row: dict) -> None:
    """A reading still over the limit, measured again in this process with no
    other measuring beside it: two readers at once on a machine of two CPUs share
    its caches, and that weighs on one size more than another. Growth that is the
    reader's own shows here too."""
    if row["place"] == "grammar":  # over in growth or in time: measured once more
        read, tools = _grammar_reading(row["slug"], row["input"], row["reader"])
        again = [_best(partial(read, each)) for each in tools]
        figures = [min(pair) for pair in zip(row["seconds"], again, strict=True)]
        figures, retries = _improved(read, tools, figures)
        row.update(seconds=figures, growth=_growth(figures), retries=row["retries"] + retries + 1)
        return
    read = _reader(rt.module(row["slug"]), row["reader"])
    figures, retries = _improved(
        read, _texts(row["slug"], row["place"], row["input"]), row["seconds"]
    )
    row.update(seconds=figures, growth=_growth(figures), retries=row["retries"] + retries)


# Building the grammars a request's tools make (issue 24): one tool with many
# properties, and many tools, each at two sizes 10x apart; the larger must also be
# built in GRAMMAR_SECONDS at most. Input name → (the builder, the sizes).
GRAMMAR_INPUTS = {
    "grammar_properties": ("tool_call_grammar", (800, 8_000)),
    "grammar_tools": ("lark_grammar", (2_000, 20_000)),
}
GRAMMAR_SECONDS = 3.0


def _grammar_tools(name: str, size: int) -> list[dict]:
    """The tools of a grammar input: one function with ``size`` required properties
    of three types, or ``size`` functions with a small schema each."""
    if name == "grammar_properties":
        kinds = ("string", "integer", "boolean")
        properties = {f"p{n}": {"type": kinds[n % 3]} for n in range(size)}
        schema = {"type": "object", "properties": properties, "required": list(properties)}
        return [{"type": "function", "function": {"name": "f", "parameters": schema}}]
    schema = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}
    return [
        {"type": "function", "function": {"name": f"f{n}", "parameters": schema}}
        for n in range(size)
    ]


def _grammar_reading(slug: str, name: str, builder: str):
    """(a function building ``builder``'s grammar from a tool list, the lists)."""
    build = getattr(rt.module(slug), builder)
    sizes = GRAMMAR_INPUTS[name][1]
    return (lambda tools: build(tools=tools)), [_grammar_tools(name, n) for n in sizes]


def measure_grammars(slug: str, inputs: tuple[str, ...] = ()) -> list[dict]:
    rows = []
    for name, (builder, _) in GRAMMAR_INPUTS.items():
        if inputs and name not in inputs:
            continue
        read, tools = _grammar_reading(slug, name, builder)
        figures = [_best(partial(read, each)) for each in tools]
        figures, retries = _improved(read, tools, figures)
        rows.append(
            {
                "slug": slug,
                "place": "grammar",
                "input": name,
                "reader": builder,
                "seconds": figures,
                "growth": _growth(figures),
                "retries": retries,
                "most": GRAMMAR_SECONDS,
            }
        )
    return rows


def _over(row: dict) -> bool:
    """Whether a reading fails the check: its growth, or (a grammar) its time."""
    return row["growth"] > LIMIT or row["seconds"][-1] > row.get("most", float("inf"))


def _measure_job(job: tuple[str, tuple[str, ...]]) -> list[dict]:
    return measure(*job) + measure_grammars(*job)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 above the limit")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    parser.add_argument("--only", nargs="*", help="these slugs only")
    parser.add_argument(
        "--inputs",
        nargs="*",
        default=(),
        help="these inputs only (nesting objects angles partial_marker open_string "
        "whitespace; mentions, mentions_call: repeated failed trigger mentions, "
        "without and with a real call after them, in the content; opener, "
        "opener_space, opener_name, opener2...: each way of opening a call, "
        "repeated, in the content; grammar_properties, grammar_tools: grammars "
        "built from many properties or tools)",
    )
    args = parser.parse_args(argv)
    slugs = args.only or rt.slugs()
    rows = []
    started = time.monotonic()
    # Each format's worst reading goes to stderr as it is measured: the whole run
    # takes a while, and a run stopped early still shows what it found.
    with multiprocessing.Pool(2) as pool:
        jobs = [(slug, tuple(args.inputs)) for slug in slugs]
        for done, found in enumerate(pool.imap_unordered(_measure_job, jobs), 1):
            rows.extend(found)
            if found:
                top = max(found, key=lambda row: row["growth"])
                print(
                    f"[{done}/{len(slugs)} {time.monotonic() - started:5.0f} s] {top['slug']}: "
                    f"worst {top['growth']:.1f}x ({top['place']}, {top['input']}, "
                    f"{top['reader']})",
                    file=sys.stderr,
                    flush=True,
                )
    for row in rows:
        if _over(row):
            measure_alone(row)
    worst = sorted(rows, key=lambda row: -row["growth"])
    if args.json:
        print(json.dumps(rows, indent=1))
    else:
        print(f"{len(rows)} measurements over {len(slugs)} formats; the ten largest growths:")
        print(f"{'format':44} {'place':10} {'input':15} {'reader':7} {'1 MB s':>8} {'growth':>7}")
        for row in worst[:10]:
            print(
                f"{row['slug']:44} {row['place']:10} {row['input']:15} {row['reader']:7} "
                f"{row['seconds'][-1]:8.3f} {row['growth']:6.1f}x"
            )
    over = [row for row in rows if _over(row)]
    again = sum(1 for row in rows if row["retries"])
    if again:
        print(f"{again} readings over {LIMIT:.0f}x measured again ({len(over)} still over)")
    verdict = "MET" if not over else f"NOT met ({len(over)} over {LIMIT:.0f}x)"
    print(f"growth per 10x <= {LIMIT:.0f}x everywhere: {verdict}")
    return 1 if args.check and over else 0


if __name__ == "__main__":
    sys.exit(main())
