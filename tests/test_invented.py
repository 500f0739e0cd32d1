"""Templates in marker styles the corpus does not contain (tests/invented/): they are
compiled like any user's templates and must round-trip, which shows the analysis reads
formats rather than recognising known ones."""

from __future__ import annotations

import importlib.util
import os

import pytest

from compiler.build import build
from compiler.sources import discover
from tests import roundtrip as rt

INVENTED = os.path.join("tests", "invented")


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    out = tmp_path_factory.mktemp("invented")
    cwd = os.getcwd()
    os.chdir(rt.ROOT)  # specs record template paths relative to the repository
    try:
        report = build(discover(INVENTED), str(out / "specs"), str(out / "generated"), log=lambda m: None)
    finally:
        os.chdir(cwd)
    return out, report


def _parsers(out):
    parsers = {}
    folder = out / "generated"
    for name in sorted(os.listdir(folder)):
        if name.endswith(".py") and name != "__init__.py":
            slug = name[:-3]
            spec = importlib.util.spec_from_file_location(f"invented_{slug}", folder / name)
            parser = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(parser)
            parsers[slug] = parser
    return parsers


def test_invented_templates_compile_without_review(compiled):
    out, report = compiled
    assert report.templates >= 10
    assert report.warnings == []


def test_invented_templates_round_trip(compiled, monkeypatch):
    out, _ = compiled
    monkeypatch.setattr(rt, "SPECS", str(out / "specs"))
    parsers = _parsers(out)
    results, failures = [], []
    for slug, parser in parsers.items():
        assert parser.SPEC["tools"]["format"] != "none", slug
        for kind in rt.ALL_KINDS:
            case = rt.build_case(slug, kind)
            if case is None:
                continue
            passed, why = rt.check(case, parser.parse)
            results.append(passed)
            if not passed:
                failures.append(f"{slug}/{kind.name}: {why[:300]}")
    rate = sum(results) / len(results)
    print(f"invented round trip: {sum(results)}/{len(results)} = {rate:.1%}")
    assert len(results) >= 90
    assert rate >= 0.90, "\n".join(failures)
