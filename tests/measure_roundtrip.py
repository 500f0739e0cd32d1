"""Measure the round trip (DESIGN.md) over the corpus specs and print the figures.

    .venv/bin/python -m tests.measure_roundtrip [--kinds content|tools|all|unswitched]
                                                [--slug S] [--show-failures]

Prints, per kind and per template, passed / expressible case counts, and the overall
figure: passed cases over expressible (template-rendered) cases. Cases the template
cannot express are not counted. ``--kinds unswitched``: every kind as a request that
gives no thinking switch sends it (rendered with the switch undefined, parsed with
``enable_thinking`` left out). With ``--show-failures``, prints the model's text, the
parsed message and the expected message of every failing case.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict

from tests import roundtrip as rt

KIND_SETS = {
    "content": rt.CONTENT_KINDS,
    "tools": rt.TOOL_KINDS,
    "all": rt.ALL_KINDS,
    # as a request that gives no thinking switch: rendered with it undefined, parsed
    # with parse's own default
    "unswitched": rt.UNSWITCHED_KINDS,
}


def measure(slugs, kinds):
    """[(slug, kind, case or None, passed or None, explanation or None)]."""
    rows: list[tuple[str, rt.Kind, rt.Case | None, bool | None, str | None]] = []
    for slug in slugs:
        for kind in kinds:
            case = rt.make_case(slug, kind)
            if case is None:
                rows.append((slug, kind, None, None, None))
                continue
            try:
                passed, why = rt.check(case)
            except Exception as error:  # a parser that raises fails its case
                passed, why = False, json.dumps(
                    {
                        "why": f"raised {type(error).__name__}: {error}",
                        "text": case.text,
                    }
                )
            rows.append((slug, kind, case, passed, why))
    return rows


def _figure(passed: int, total: int) -> str:
    rate = f"{passed / total:.1%}" if total else "n/a"
    return f"{passed:4d}/{total:<4d} {rate:>6}"


def report(rows, kinds, out=sys.stdout, show_failures=False) -> tuple[int, int]:
    by_kind: defaultdict[str, list[int]] = defaultdict(lambda: [0, 0])
    by_slug: defaultdict[str, list[int]] = defaultdict(lambda: [0, 0])
    marks: defaultdict[str, str] = defaultdict(str)
    for slug, kind, case, passed, _ in rows:
        if case is None:
            marks[slug] += "."
            continue
        marks[slug] += "+" if passed else "x"
        for tally in (by_kind[kind.name], by_slug[slug]):
            tally[0] += bool(passed)
            tally[1] += 1

    width = max(len(kind.name) for kind in kinds)
    print("per kind (passed/expressible):", file=out)
    for kind in kinds:
        passed, total = by_kind[kind.name]
        print(f"  {kind.name:<{width}}  {_figure(passed, total)}", file=out)

    print(
        "\nper template (passed/expressible; + pass, x fail, . not expressible):",
        file=out,
    )
    print(
        "  kinds: " + ", ".join(f"{i + 1}={k.name}" for i, k in enumerate(kinds)),
        file=out,
    )
    slug_width = max((len(slug) for slug in marks), default=0)
    for slug in marks:
        passed, total = by_slug[slug]
        print(
            f"  {slug:<{slug_width}}  {marks[slug]}  {_figure(passed, total)}", file=out
        )

    passed = sum(tally[0] for tally in by_kind.values())
    total = sum(tally[1] for tally in by_kind.values())
    print(f"\noverall: {_figure(passed, total)} over {len(marks)} templates", file=out)

    if show_failures:
        for slug, kind, case, ok, why in rows:
            if case is None or ok:
                continue
            print(f"\n=== FAIL {slug} / {kind.name}", file=out)
            try:
                detail = json.loads(why)
            except ValueError:
                detail = {"why": why}
            for key in ("why", "text", "parsed", "expected"):
                if key in detail:
                    value = detail[key]
                    shown = (
                        value if key == "why" else json.dumps(value, ensure_ascii=False)
                    )
                    print(f"  {key:8}: {shown}", file=out)
    return passed, total


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kinds", choices=sorted(KIND_SETS), default="all")
    parser.add_argument(
        "--slug", action="append", help="only this template (repeatable)"
    )
    parser.add_argument("--show-failures", action="store_true")
    args = parser.parse_args(argv)

    slugs = rt.slugs()
    if args.slug:
        unknown = sorted(set(args.slug) - set(slugs))
        if unknown:
            parser.error(f"no spec for {', '.join(unknown)}")
        slugs = [slug for slug in slugs if slug in args.slug]
    kinds = KIND_SETS[args.kinds]
    report(measure(slugs, kinds), kinds, show_failures=args.show_failures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
