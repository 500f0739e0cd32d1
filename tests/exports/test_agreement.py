"""The structural tag (xgrammar) takes what the GBNF takes (``make test-exports``):
tests/test_export_agreement.py's checks, for xgrammar's reading of ``structural_tag``
(issue 33: the first live run found the tag refusing whitespace the GBNF and the
reader take, keys in sorted order, a string in Python's other quote)."""

from __future__ import annotations

import json

import pytest

from tests import agreement
from tests.test_export_agreement import FOUND, gbnf

xgr = pytest.importorskip("xgrammar")

from tests.exports.test_structural_tag import EOS, _compiled  # noqa: E402


def tag(slug: str, text: str) -> tuple[bool, bool]:
    """(whether the structural tag takes every byte of the output ``text``, and
    whether it may end there)."""
    matcher = xgr.GrammarMatcher(
        _compiled(json.dumps(agreement.grammars(slug)["tag"], ensure_ascii=False))
    )
    if not matcher.accept_string(text.encode("utf-8")):
        return False, False
    return True, matcher.accept_token(EOS)


@pytest.mark.parametrize("slug", agreement.slugs())
def test_a_spaced_call_is_taken_alike(slug):
    call = agreement.call_text(slug)
    if call is None:
        pytest.skip("the template writes no call to book_table that parse reads back")
    assert tag(slug, call.lead + call.text) == (True, True)
    refused = []
    for at, text in agreement.spaced(call.text, len(agreement.trigger_of(slug))):
        if gbnf(slug, text) == (True, True) and tag(slug, call.lead + text) != (True, True):
            refused.append(text[max(0, at - 20) : at + 12])
    assert not refused, f"the tag refuses a line break the GBNF takes: {refused[:5]}"


@pytest.mark.parametrize(
    "index",
    range(len(agreement.live_outputs())),
    ids=lambda i: agreement.live_outputs()[i]["slug"],
)
def test_the_first_live_runs_outputs(index):
    found = agreement.live_outputs()[index]
    slug, output = found["slug"], found["output"]
    trigger = agreement.trigger_of(slug)
    at = output.find(trigger) if trigger else 0
    if not gbnf(slug, output[at:])[0]:
        return  # the GBNF refuses it now
    assert tag(slug, output)[0], f"the tag refuses what the GBNF takes ({found['found']})"


@pytest.mark.parametrize(
    "slug,text,taken,read,why", FOUND, ids=[f"{s}: {w}" for s, _, _, _, w in FOUND]
)
def test_what_the_first_run_found(slug, text, taken, read, why):
    assert tag(slug, agreement.lead_of(slug) + text)[1] == taken, why
