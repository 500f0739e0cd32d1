"""Every corpus format with tool calls, decoded once by the live model.

The protocol, per format (``run_format``):

1. The prompt: a system and a user message asking for a table booking, rewritten by
   the module's ``prepare_messages`` (which adds the tools to the system message
   where the template shows none, and our fallback call's instructions where it
   writes no calls), rendered by the corpus template with ``TOOLS`` (typed
   arguments: string, integer, boolean, enum, a nested object, an array) and thinking
   off, tokenized by the model's tokenizer.
2. The prefill: the format's trigger (a literal one: ``TRIGGERS``' word or token;
   a pattern trigger has none, and its calls' grammar starts at the output's first
   token), after the reasoning block's closer where the prompt opens a block that
   thinking off does not close.
3. The decode: greedy, at most ``cap`` tokens, held to ``tool_call_grammar(TOOLS,
   parallel_tool_calls=False)`` read by llguidance from the trigger on.
4. The replay: the same ids (prefill included) through ``lark_grammar`` (llguidance)
   and ``structural_tag`` (xgrammar), both for the whole output with tool_choice
   "required" and one call: each must take every token, and may end where the GBNF
   ended.
5. The reading: the model's end-of-sequence token dropped, the output's token pieces
   fed one by one to ``StreamParser`` and through the vLLM plugin, and the whole
   text to ``parse``: one call, to a function of ``TOOLS``, its arguments valid
   under that function's JSON schema (jsonschema), the stream equal to parse, no
   marker left in the content.

Each format gives a ``Row``: pass, or the first cause found, by class (``CAUSES``).
"""

from __future__ import annotations

import json
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import jsonschema

from compiler.model import thinking_switch
from tests import roundtrip as rt
from tests.fallback_outputs import format_of
from tests.live import reading
from tests.live.decode import Decoded, GrammarRefused, Grammars, Matcher, decode, replay
from tests.live.model import Loaded
from tests.live.table import Row
from tests.live.tools import SCHEMAS, SYSTEM, TOOLS, USER

# What the model must not leave in content besides the format's own markers.
MODEL_MARKERS = ("<|im_start|>", "<|im_end|>")
ENABLE_THINKING = False


@dataclass
class Prompt:
    messages: list[dict]  # as prepared for the template
    text: str
    ids: list[int]
    lead: str  # prefilled before the trigger (a reasoning block's closer) or ""
    trigger: str  # the prefilled trigger, "" for a pattern trigger
    lead_ids: list[int]
    trigger_ids: list[int]
    template_kwargs: dict  # the thinking switch as a request names it


class Context:
    """What every format's run shares: the model, the grammars' tokenizers, the
    vLLM plugins (made once per format)."""

    def __init__(
        self,
        loaded: Loaded,
        cap: int,
        vllm: bool = True,
        penalty: tuple[float, float] = (0.0, 0.0),
    ):
        self.loaded = loaded
        self.cap = cap
        self.penalty = penalty  # frequency and presence (decode.OutputPenalty)
        self.grammars = Grammars(loaded)
        self.vllm = reading.VllmPath(loaded) if vllm else None


def slugs() -> list[str]:
    """The corpus formats with tool calls (the template's own or our fallback)."""
    return [slug for slug in rt.slugs() if format_of(slug).has_calls]


def prompt_for(slug: str, loaded: Loaded) -> Prompt:
    spec = rt.load_spec(slug)
    module = rt.module(slug)
    template = rt.template_for(spec)
    if template is None:
        raise RuntimeError(f"{slug}: its template is missing (run `make templates`)")
    history = [{"role": "user", "content": USER}]
    if spec["capabilities"]["system_role"]:
        history.insert(0, {"role": "system", "content": SYSTEM})
    messages = module.prepare_messages(history, tools=TOOLS)
    text = template.render(
        messages,
        tools=rt.template_tools(spec, TOOLS),
        add_generation_prompt=True,
        enable_thinking=ENABLE_THINKING,
    )
    fmt = format_of(slug)
    lead = ""
    if fmt.reasoning.has_block and fmt.reasoning.opened_by_prompt(
        ENABLE_THINKING, tools=True
    ):
        lead = fmt.reasoning.end
    trigger = ""
    literal = [t for t in module.TRIGGERS if t["type"] in (0, 1)]
    if literal:
        trigger = literal[0]["value"]
    # Thinking off as a request says it: enable_thinking, and the template's own
    # switch's values for off where it has one (a request that gives none gets the
    # template's default, which may be on).
    switch = thinking_switch(spec["capabilities"].get("thinking_switch"))
    kwargs = {"enable_thinking": ENABLE_THINKING}
    if switch is not None:
        kwargs.update(switch.setting(ENABLE_THINKING))
    tokenizer = loaded.tokenizer
    return Prompt(
        messages,
        text,
        _ids(tokenizer, text),
        lead,
        trigger,
        _ids(tokenizer, lead),
        _ids(tokenizer, trigger),
        kwargs,
    )


def _ids(tokenizer, text: str) -> list[int]:
    return tokenizer(text, add_special_tokens=False)["input_ids"] if text else []


# The grammars a decode may be held to: the lazy calls' grammar (GBNF from the
# trigger on) and the three exports of a whole output.
EXPORTS = ("gbnf", "lark", "structural tag")
NAMED = {"type": "function", "function": {"name": "book_table"}}


@dataclass(frozen=True)
class Setting:
    """One decode: the grammar that holds it, and the exports that replay it."""

    name: str
    export: str  # "calls" (tool_call_grammar) or one of EXPORTS
    choice: str | dict = "required"  # tool_choice of the whole-output grammars
    replays: tuple[str, ...] = ()  # the EXPORTS the output is replayed through
    lazy: bool = False  # unconstrained until the trigger (tool_choice "auto")


DEFAULT = Setting("default", "calls", "required", ("lark", "structural tag"))


def matrix() -> list[Setting]:
    """The full matrix (``--full``): every export decoded under "required" and a
    named function, each replayed through the other two; then "auto" with the lazy
    trigger, checked for dead ends only."""
    found = []
    for choice, label in (("required", "required"), (NAMED, "named")):
        for export in EXPORTS:
            others = tuple(other for other in EXPORTS if other != export)
            found.append(Setting(f"{export}/{label}", export, choice, others))
    found.append(Setting("auto (lazy trigger)", "calls", "auto", lazy=True))
    return found


def run_format(slug: str, context: Context, setting: Setting = DEFAULT) -> Row:
    """One decode of one format (the module docstring's protocol)."""
    started = time.monotonic()
    row = Row(slug, setting.name, fallback=bool(format_of(slug).fallback))
    try:
        _run(slug, context, row, setting)
    except Exception as error:  # the row says so; the run goes on
        row.fail("error", f"{type(error).__name__}: {error}")
        row.notes.append(traceback.format_exc(limit=6))
    row.seconds = time.monotonic() - started
    return row


def run_matrix(slug: str, context: Context) -> list[Row]:
    return [run_format(slug, context, setting) for setting in matrix()]


def grammar_for(
    module, grammars: Grammars, export: str, choice
) -> Callable[[], Matcher]:
    """A maker of matchers for ``export`` under ``choice`` (one call at most, thinking
    off), its grammar compiled once first: GrammarRefused where the consumer refuses
    it, ValueError where the module refuses the choice."""
    settings = dict(
        tool_choice=choice, parallel_tool_calls=False, enable_thinking=ENABLE_THINKING
    )
    make: Callable[[], Matcher]
    if export == "calls":
        text = module.tool_call_grammar(TOOLS, parallel_tool_calls=False)
        make = lambda: grammars.gbnf(text, "tool_call_grammar")  # noqa: E731
    elif export == "gbnf":
        text = module.grammar(TOOLS, **settings)
        make = lambda: grammars.gbnf(text, "gbnf")  # noqa: E731
    elif export == "lark":
        text = module.lark_grammar(TOOLS, **settings)
        make = lambda: grammars.lark(text, "lark")  # noqa: E731
    else:
        tag = module.structural_tag(TOOLS, **settings)
        make = lambda: grammars.structural_tag(tag, "structural tag")  # noqa: E731
    make()
    return make


_MISSING = {
    "gbnf": "gbnf",
    "calls": "gbnf",
    "lark": "lark",
    "structural tag": "structural_tag",
}


def _run(slug: str, context: Context, row: Row, setting: Setting) -> None:
    module = rt.module(slug)
    for export in {setting.export, *setting.replays}:
        missing = module.MISSING_EXPORTS.get(_MISSING[export])
        if missing is not None:
            row.fail("missing-export", f"{export}: {missing}")
            return
    loaded = context.loaded
    prompt = prompt_for(slug, loaded)
    if setting.lazy and not prompt.trigger:
        row.call = "not run: a pattern trigger has no literal to wake the grammar"
        return
    grammars = context.grammars
    try:
        grammar = grammar_for(module, grammars, setting.export, setting.choice)
    except (GrammarRefused, ValueError) as error:
        row.fail("refused", f"{setting.export}: {error}")
        return
    forced = prompt.lead_ids + prompt.trigger_ids
    # The calls' grammar reads from the trigger on; a whole output's, from its start.
    decoded = decode(
        loaded,
        prompt.ids,
        [] if setting.lazy else forced,
        context.cap,
        grammar,
        prompt.trigger_ids if setting.export == "calls" else forced,
        trigger=prompt.trigger if setting.lazy else None,
        stop=module.STOP,
        penalty=context.penalty,
    )
    row.tokens = len(decoded.ids)
    row.output = loaded.tokenizer.decode(decoded.text_ids, skip_special_tokens=False)
    check_decode(row, decoded, context)
    if setting.lazy:
        if row.cause == "token-cap":
            row.cause, row.detail = (
                None,
                "",
            )  # prose to the cap is no fault under "auto"
            row.call = "(no call within the cap)"
        return
    for export in setting.replays:
        try:
            other = grammar_for(module, grammars, export, setting.choice)()
        except (GrammarRefused, ValueError) as error:
            row.fail("refused", f"{export}: {error}")
            continue
        check_replay(row, other, decoded, loaded.tokenizer)
    read(slug, module, prompt, decoded, context, row, setting)


def check_decode(row: Row, decoded: Decoded, context: Context) -> None:
    if decoded.refused:
        row.fail("refused", f"the decoding grammar: {decoded.refused}")
    elif decoded.dead_end is not None:
        text = context.loaded.tokenizer.decode(
            decoded.output_ids, skip_special_tokens=False
        )
        row.fail(
            "dead-end",
            f"{decoded.dead_end.why} after {decoded.dead_end.at} tokens: {text[-160:]!r}",
        )
    elif not decoded.finished:
        row.fail("token-cap", f"{context.cap} tokens without the end of the call")
    elif decoded.stopped is not None and decoded.accepting is False:
        row.fail("stopped", f"the output reached {decoded.stopped!r} inside the call")


def check_replay(row: Row, matcher: Matcher, decoded: Decoded, tokenizer) -> None:
    """The output's ids (prefill included) through another export's matcher."""
    if decoded.refused:
        return
    ids = decoded.text_ids
    result = replay(matcher, ids)
    if result.refused_at is not None:
        at = result.refused_at
        before = tokenizer.decode(ids[:at], skip_special_tokens=False)
        token = tokenizer.decode(ids[at : at + 1], skip_special_tokens=False)
        row.fail(
            "export",
            f"{matcher.name} refuses token {at} of {len(ids)}, {token!r} after"
            f" {before[-60:]!r}"
            + (f": {result.why.splitlines()[0]}" if result.why else ""),
        )
    elif decoded.finished and decoded.accepting and not result.accepting:
        row.fail("export", f"{matcher.name} cannot end where the decoding grammar did")


def read(
    slug: str,
    module,
    prompt: Prompt,
    decoded: Decoded,
    context: Context,
    row: Row,
    setting: Setting = DEFAULT,
) -> None:
    """parse, the stream and the vLLM plugin over the output."""
    if decoded.refused:
        return
    loaded = context.loaded
    texts = reading.pieces(loaded, prompt.ids, decoded.text_ids)
    whole = "".join(texts)
    row.output = whole
    if not whole.startswith(prompt.lead + prompt.trigger):
        row.notes.append(
            f"the decoded output does not start with the prefill: {whole[:80]!r}"
        )
    message, stream_differs = reading.stream_vs_parse(
        module, texts, tools=TOOLS, enable_thinking=ENABLE_THINKING
    )
    calls = message["tool_calls"]
    row.call = "; ".join(
        f"{call['function']['name']}({call['function']['arguments']})" for call in calls
    )
    if stream_differs:
        row.fail("stream", "; ".join(stream_differs[:3]))
    if decoded.finished and decoded.accepting and decoded.dead_end is None:
        check_message(row, module, message, whole)
        named = (
            setting.choice["function"]["name"]
            if isinstance(setting.choice, dict)
            else None
        )
        if named is not None and any(c["function"]["name"] != named for c in calls):
            row.fail("schema", f"tool_choice names {named!r}: {row.call}")
    if context.vllm is not None:
        spec_path = Path(rt.SPECS) / f"{slug}.yaml"
        found = context.vllm.read(
            slug,
            spec_path,
            messages=prompt.messages,
            tools=TOOLS,
            template_kwargs=prompt.template_kwargs,
            prompt_ids=prompt.ids,
            output_ids=decoded.output_ids,
            ended=decoded.ended,
            finished=decoded.finished,
            stop=module.STOP,
            want=reading.plain(message),
        )
        if found:
            row.fail("vllm", "; ".join(found[:3]))


def check_message(row: Row, module, message: dict, whole: str) -> None:
    """One call, to a function of TOOLS, its arguments valid; no marker in content."""
    calls = message["tool_calls"]
    if len(calls) != 1:
        row.fail("parse", f"{len(calls)} calls read from {whole[-200:]!r}")
    for call in calls:
        name = call["function"]["name"]
        if name not in SCHEMAS:
            row.fail("schema", f"a call to {name!r}, not a function of the tools")
            continue
        try:
            arguments = json.loads(call["function"]["arguments"])
        except ValueError:
            row.fail(
                "schema", f"arguments are not JSON: {call['function']['arguments']!r}"
            )
            continue
        errors = sorted(
            jsonschema.Draft202012Validator(SCHEMAS[name]).iter_errors(arguments),
            key=lambda error: list(error.path),
        )
        if errors:
            where = "/".join(map(str, errors[0].path)) or "(top)"
            row.fail("schema", f"{name}: at {where}: {errors[0].message}")
    content = message["content"] or ""
    markers = {*module.PRESERVED_TOKENS, *module.STOP, *MODEL_MARKERS}
    markers |= {t["value"] for t in module.TRIGGERS if t["type"] in (0, 1)}
    left = sorted(marker for marker in markers if marker.strip() and marker in content)
    if left:
        row.fail("marker", f"{left} in content {content[:120]!r}")
