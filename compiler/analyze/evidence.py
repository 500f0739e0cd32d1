"""What an analyzer saw when it decided something: the decision, why, and the two
renders whose difference led to it. ``python -m compiler explain`` prints these for
reviewers; nothing downstream of the analysis reads them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Render:
    label: str  # what was rendered, e.g. "assistant turn with reasoning, thinking on"
    text: str


@dataclass(frozen=True)
class Evidence:
    decision: str  # the spec path and value decided, e.g. "reasoning.end = '</think>'"
    reason: str  # one sentence: why the difference means that
    left: Render | None = None
    right: Render | None = None
