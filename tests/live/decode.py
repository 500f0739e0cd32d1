"""Constrained greedy decoding with transformers, and replaying token ids through
other grammars.

A grammar is read by its consumer's own library: GBNF and Lark by llguidance (over
the model's real tokenizer, ``llguidance.hf.from_tokenizer``), structural tags by
xgrammar (``TokenizerInfo.from_huggingface``). Both give the next token's mask as the
same bitmask (one bit a token id, in int32 words), so one logits processor serves
both: ``GrammarProcessor``, the short transformers ``LogitsProcessor`` llguidance does
not ship.

A *dead end* is a state where the grammar allows no token, or only the end of the
sequence while it is not in an accepting state: a sampler held to the grammar cannot
finish. The processor records the first one and lets only the end-of-sequence token
through, so the decode stops there.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import llguidance
import llguidance.hf
import torch
import xgrammar as xgr
from transformers import (
    LogitsProcessor,
    LogitsProcessorList,
    StoppingCriteria,
    StoppingCriteriaList,
)

from tests.live.model import Loaded


class GrammarRefused(ValueError):
    """A grammar its consumer does not compile."""


class Matcher:
    """One grammar's state over one output: the interface both libraries give."""

    name = ""

    def fill(self, bitmask: torch.Tensor) -> None:
        raise NotImplementedError

    def consume(self, token: int) -> bool:
        raise NotImplementedError

    def accepting(self) -> bool:
        """Whether the text consumed so far is a whole sentence of the grammar."""
        raise NotImplementedError

    def error(self) -> str:
        return ""


class LLGuidanceMatcher(Matcher):
    def __init__(
        self, tokenizer: llguidance.LLTokenizer, kind: str, text: str, name: str
    ):
        self.name = name
        try:
            grammar = llguidance.grammar_from(kind, text)  # type: ignore[arg-type]
        except ValueError as error:
            raise GrammarRefused(
                f"{name}: llguidance does not convert it: {error}"
            ) from None
        self.matcher = llguidance.LLMatcher(tokenizer, grammar, log_level=0)
        if self.matcher.is_error():
            raise GrammarRefused(
                f"{name}: llguidance: {self.matcher.get_error()[:300]}"
            )

    def fill(self, bitmask: torch.Tensor) -> None:
        row = bitmask[0]
        self.matcher.unsafe_compute_mask_ptr(
            row.data_ptr(), row.numel() * row.element_size()
        )

    def consume(self, token: int) -> bool:
        return self.matcher.consume_token(token)

    def accepting(self) -> bool:
        return self.matcher.is_accepting()

    def error(self) -> str:
        return self.matcher.get_error()[:300] if self.matcher.is_error() else ""


class XGrammarMatcher(Matcher):
    def __init__(self, compiled, name: str):
        self.name = name
        self.matcher = xgr.GrammarMatcher(compiled)

    def fill(self, bitmask: torch.Tensor) -> None:
        self.matcher.fill_next_token_bitmask(bitmask)

    def consume(self, token: int) -> bool:
        return self.matcher.accept_token(token)

    def accepting(self) -> bool:
        return self.matcher.is_completed()


class Grammars:
    """The model's tokenizer as each library reads it, made once (llguidance's
    takes about a second, xgrammar's more)."""

    def __init__(self, loaded: Loaded):
        self.loaded = loaded
        self.ll_tokenizer = llguidance.hf.from_tokenizer(
            loaded.tokenizer, n_vocab=loaded.vocab_size, eos_token=loaded.eos_id
        )
        info = xgr.TokenizerInfo.from_huggingface(
            loaded.tokenizer,
            vocab_size=loaded.vocab_size,
            stop_token_ids=[loaded.eos_id],
        )
        self.xgr_compiler = xgr.GrammarCompiler(info, max_threads=1)

    def gbnf(self, text: str, name: str = "gbnf") -> Matcher:
        return LLGuidanceMatcher(self.ll_tokenizer, "gbnf", text, name)

    def lark(self, text: str, name: str = "lark") -> Matcher:
        return LLGuidanceMatcher(self.ll_tokenizer, "lark", text, name)

    def structural_tag(self, tag: dict, name: str = "structural tag") -> Matcher:
        return XGrammarMatcher(
            self._compiled_tag(json.dumps(tag, ensure_ascii=False)), name
        )

    @functools.lru_cache(maxsize=64)  # noqa: B019 (one Grammars per run)
    def _compiled_tag(self, tag_json: str):
        try:
            return self.xgr_compiler.compile_structural_tag(tag_json)
        except (RuntimeError, ValueError) as error:
            raise GrammarRefused(f"xgrammar does not compile it: {error}") from None


def allowed(bitmask: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """The bitmask as one bool per token id."""
    bits = (bitmask[0].unsqueeze(-1) >> torch.arange(32, dtype=torch.int32)) & 1
    return bits.flatten()[:vocab_size].bool()


@dataclass
class DeadEnd:
    at: int  # how many tokens of the output the grammar had consumed
    why: str


@dataclass
class GrammarProcessor(LogitsProcessor):
    """Holds transformers' greedy search to ``matcher``.

    ``start`` is the length of the ids ``generate`` starts from: every id after it
    is one the model chose, consumed by the matcher before the next mask. With a
    ``trigger`` (lazy), the matcher sleeps until the decoded output holds the
    trigger, then consumes the output from the trigger on (re-tokenized, as a
    server hands a lazy grammar the text from its trigger) and holds the rest."""

    matcher: Matcher
    loaded: Loaded
    start: int
    trigger: str | None = None
    consumed: int = 0  # the ids of the output the matcher has read
    dead_end: DeadEnd | None = None
    refused: str | None = None
    awake: bool = field(init=False)
    _seen: int = field(init=False, default=0)
    _text: str = field(init=False, default="")

    def __post_init__(self) -> None:
        self.awake = self.trigger is None
        self._seen = self.start
        self._bitmask = torch.zeros(
            (1, (self.loaded.vocab_size + 31) // 32), dtype=torch.int32
        )

    def __call__(
        self, input_ids: torch.LongTensor, scores: torch.FloatTensor
    ) -> torch.FloatTensor:
        self.catch_up(input_ids[0].tolist())
        if not self.awake:
            return scores
        eos = self.loaded.eos_id
        if self.dead_end is None and self.refused is None:
            self.matcher.fill(self._bitmask)
            mask = allowed(self._bitmask, self.loaded.vocab_size)
            count = int(mask.sum())
            if count == 0:
                self.dead_end = DeadEnd(self.consumed, "no token allowed")
            elif count == 1 and bool(mask[eos]) and not self.matcher.accepting():
                self.dead_end = DeadEnd(
                    self.consumed, "only end-of-sequence allowed, not accepting"
                )
            else:
                return scores.masked_fill(~mask[: scores.shape[-1]], float("-inf"))
        # Stuck: let the output end here.
        only_eos = torch.full_like(scores, float("-inf"))
        only_eos[..., eos] = 0.0
        return only_eos

    def catch_up(self, ids: list[int]) -> None:
        """Consume what the model chose since the last call: ``ids`` are the whole
        sequence so far (after the decode, without its end-of-sequence token: generate
        stops without asking for another mask)."""
        new, self._seen = ids[self._seen :], len(ids)
        for token in new:
            if self.dead_end is not None or self.refused is not None:
                break
            if self.awake:
                if not self.matcher.consume(token):
                    self.refused = f"token {token} refused: {self.matcher.error()}"
                self.consumed += 1
            else:
                self._wake(token)

    def _wake(self, token: int) -> None:
        assert self.trigger is not None
        self._text += self.loaded.tokenizer.decode([token], skip_special_tokens=False)
        at = self._text.find(self.trigger)
        if at < 0:
            return
        self.awake = True
        rest = self._text[at:]
        pieces = self.loaded.tokenizer(rest, add_special_tokens=False)["input_ids"]
        for piece in pieces:
            if not self.matcher.consume(piece):
                self.refused = (
                    f"the text from the trigger on refused: {self.matcher.error()}"
                )
                return
            self.consumed += 1


@dataclass
class OutputPenalty(LogitsProcessor):
    """OpenAI's ``frequency_penalty`` and ``presence_penalty`` (vLLM's too): each token's
    logit less ``frequency`` times the times the output holds it so far, and less
    ``presence`` once it holds it at all. Only the output's tokens count (``start``:
    where it begins), never the prompt's; the search stays greedy and the grammar's
    mask applies after it. A small model that repeats itself (an array of the same
    string, a digit run, blank lines after the call) is pushed towards the token
    that closes what it writes."""

    start: int
    frequency: float = 0.0
    presence: float = 0.0

    def __call__(
        self, input_ids: torch.LongTensor, scores: torch.FloatTensor
    ) -> torch.FloatTensor:
        output = input_ids[0, self.start :]
        if not output.numel() or not (self.frequency or self.presence):
            return scores
        counts = torch.bincount(output, minlength=scores.shape[-1])[: scores.shape[-1]]
        counts = counts.to(scores.dtype)
        penalty = self.frequency * counts + self.presence * (counts > 0).to(scores.dtype)
        return scores - penalty.unsqueeze(0)


class StopStrings(StoppingCriteria):
    """Ends the decode once the output after ``start`` holds one of ``stop``, as a
    server given the module's ``STOP`` strings does (vLLM's ``stop``). The string
    may end inside the last token (``><`` of ``<|eot_id|><``): ``cut`` then makes
    the output end where the string ends, as vLLM's text does."""

    def __init__(self, tokenizer, start: int, stop: list[str]):
        self.tokenizer = tokenizer
        self.start = start
        self.stop = [text for text in stop if text]
        self.longest = max(map(len, self.stop), default=0)
        self.hit: str | None = None

    def __call__(
        self, input_ids: torch.LongTensor, scores, **kwargs
    ) -> torch.BoolTensor:
        # The last tokens that can hold a stop string ending in the newest one (each
        # token holds a character at least); any earlier one would have stopped.
        tail = input_ids[0, max(self.start, input_ids.shape[1] - self.longest - 1) :]
        text = self.tokenizer.decode(tail.tolist(), skip_special_tokens=False)
        self.hit = next((stop for stop in self.stop if stop in text), None)
        return torch.tensor([self.hit is not None])

    def cut(self, ids: list[int]) -> list[int]:
        """The output ``ids`` (from ``start``) ending where the stop string begins
        (vLLM's text leaves it out; with a model that writes the marker as its
        end-of-sequence token, the grammar never sees it): the tokens before it, and
        the tokens of the text between them and it."""
        assert self.hit is not None
        whole = self.tokenizer.decode(ids, skip_special_tokens=False)
        at = whole.find(self.hit)
        for keep in range(len(ids), -1, -1):
            before = self.tokenizer.decode(ids[:keep], skip_special_tokens=False)
            if len(before) <= at and whole.startswith(before):
                rest = whole[len(before) : at]
                return ids[:keep] + (
                    self.tokenizer(rest, add_special_tokens=False)["input_ids"]
                    if rest
                    else []
                )
        return ids


@dataclass
class Decoded:
    prompt_ids: list[int]
    forced_ids: list[int]  # the prefilled start of the output
    ids: list[int]  # what the model chose, the end-of-sequence token included
    ended: bool  # the model chose the end-of-sequence token
    stopped: str | None  # the stop string the output reached, where it did
    accepting: bool | None  # the decoding grammar's state at the end (None: none)
    dead_end: DeadEnd | None
    refused: str | None  # a forced token the grammar refused
    seconds: float

    @property
    def output_ids(self) -> list[int]:
        """The output as a server sees it: the prefill, then the model's ids."""
        return self.forced_ids + self.ids

    @property
    def text_ids(self) -> list[int]:
        """The output without the model's end-of-sequence token."""
        return self.output_ids[:-1] if self.ended else self.output_ids

    @property
    def finished(self) -> bool:
        """The model ended the output (its end-of-sequence token or a stop string)."""
        return self.ended or self.stopped is not None


def decode(
    loaded: Loaded,
    prompt_ids: list[int],
    forced_ids: list[int],
    cap: int,
    grammar: Callable[[], Matcher] | None = None,
    grammar_forced: list[int] | None = None,
    trigger: str | None = None,
    stop: list[str] | None = None,
    penalty: tuple[float, float] = (0.0, 0.0),
) -> Decoded:
    """Greedy decoding after ``prompt_ids`` + ``forced_ids``, at most ``cap`` new
    tokens, held to a matcher made by ``grammar`` (which first reads
    ``grammar_forced``: the forced ids from where its grammar begins; with
    ``trigger``, it sleeps until the output holds it), ending at the end-of-sequence
    token or where the output reaches one of ``stop``; ``penalty``: OpenAI's
    frequency and presence penalties on the output's tokens (``OutputPenalty``).
    Whether the grammar may end where the output ends is read by a fresh matcher
    over the output's ids."""
    started = time.monotonic()
    processors = None
    processor = None
    refused = None
    matcher_forced = grammar_forced or []
    if grammar is not None:
        matcher = grammar()
        for at, token in enumerate(matcher_forced):
            if not matcher.consume(token):
                refused = f"prefill token {at} ({token}) refused: {matcher.error()}"
                break
        if refused is None:
            processor = GrammarProcessor(
                matcher,
                loaded,
                len(prompt_ids) + len(forced_ids),
                trigger,
                consumed=len(matcher_forced),
            )
            processors = LogitsProcessorList([processor])
    if refused is not None:
        return Decoded(
            prompt_ids, forced_ids, [], False, None, False, None, refused, 0.0
        )
    start = len(prompt_ids) + len(forced_ids)
    if any(penalty):
        # The penalty first, the grammar's mask last (it leaves the allowed tokens'
        # order as the penalty made it).
        penalized = OutputPenalty(len(prompt_ids), *penalty)
        processors = LogitsProcessorList([penalized, *(processors or [])])
    inputs = torch.tensor([prompt_ids + forced_ids])
    stopping = StopStrings(loaded.tokenizer, start, stop or [])
    with torch.inference_mode():
        out = loaded.model.generate(
            inputs,
            attention_mask=torch.ones_like(inputs),
            max_new_tokens=cap,
            do_sample=False,
            logits_processor=processors,
            stopping_criteria=(
                StoppingCriteriaList([stopping]) if stopping.stop else None
            ),
            eos_token_id=loaded.eos_id,
            pad_token_id=loaded.eos_id,
        )
    ids = out[0, start:].tolist()
    ended = bool(ids) and ids[-1] == loaded.eos_id
    if stopping.hit is not None and not ended:
        ids = stopping.cut(ids)
    accepting = None
    if grammar is not None and trigger is None:
        again = replay(grammar(), matcher_forced + ids[: len(ids) - ended])
        accepting = again.refused_at is None and again.accepting
    return Decoded(
        prompt_ids,
        forced_ids,
        ids,
        ended,
        stopping.hit if not ended else None,
        accepting,
        processor.dead_end if processor else None,
        processor.refused if processor else None,
        time.monotonic() - started,
    )


@dataclass
class Replay:
    name: str
    refused_at: int | None  # the index of the first token refused
    accepting: bool  # after every token: the grammar may end there
    why: str = ""


def replay(matcher: Matcher, ids: list[int]) -> Replay:
    """``ids`` fed to ``matcher`` one by one."""
    for at, token in enumerate(ids):
        if not matcher.consume(token):
            return Replay(matcher.name, at, False, matcher.error())
    return Replay(matcher.name, None, matcher.accepting())
