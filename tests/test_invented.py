"""Templates in marker styles the corpus does not contain (tests/invented/): they are
compiled like any user's templates and must round-trip, which shows the analysis reads
formats rather than recognising known ones."""

from __future__ import annotations

import json
import os

import pytest

from compiler.loader import load_generated
from compiler.render import EOS_PLACEHOLDER
from tests import roundtrip as rt

INVENTED = os.path.join("tests", "invented")


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    out = tmp_path_factory.mktemp("invented")
    return out, rt.build_invented(out)


def _parsers(out):
    parsers = {}
    folder = out / "generated"
    for name in sorted(os.listdir(folder)):
        if name.endswith(".py") and not name.startswith("_"):
            slug = name[:-3]
            parsers[slug] = load_generated(folder, slug)
    return parsers


# Templates that write a user's turn without its text: built with a warning saying so.
USERLESS = ("voice_listener",)


def test_invented_templates_compile_without_review(compiled):
    out, report = compiled
    assert report.templates >= 10
    assert report.failures == []
    assert report.warnings == [
        f"{os.path.join(INVENTED, name)}.jinja: renders no user text (the user's message "
        "never shows in its prompt), but renders the assistant's turn, which is what a "
        "parser reads: built from that; check it is a chat template"
        for name in USERLESS
    ]


def test_a_template_without_user_text_reads_assistant_turns(compiled, monkeypatch):
    """An ASR-like template (its user's turn is audio) has the format any chat template
    has in its assistant's turns: read whole, cut anywhere, and round-tripped."""
    out, _ = compiled
    parser = _parsers(out)["voice_listener"]
    # It prints a list of typed blocks given as content: with no user text to find the
    # turn by, that is still no reasoning field.
    assert parser.SPEC["capabilities"]["reasoning_field"] is None
    assert parser.SPEC["reasoning"]["mode"] == "none"
    text = 'Let me check.\n<|act|>{"name": "get_weather", "arguments": {"city": "Oslo"}}<|/act|><|hush|>'
    message = parser.parse(text)
    assert message["content"] == "Let me check."
    assert [(c["function"]["name"], json.loads(c["function"]["arguments"]))
            for c in message["tool_calls"]] == [("get_weather", {"city": "Oslo"})]  # fmt: skip
    assert parser.parse("It is sunny.<|hush|>")["content"] == "It is sunny."
    monkeypatch.setattr(rt, "SPECS", str(out / "specs"))
    cases = [case for kind in rt.ALL_KINDS if (case := rt.build_case("voice_listener", kind))]
    assert len(cases) >= 6
    for case in cases:
        passed, why = rt.check(case, parser.parse)
        assert passed, why


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


def test_whole_content_turn_reads_back(compiled, monkeypatch):
    """The model's whole turn, up to where the tokenizer's eos would stop it (not cut
    at the content as the round trip does): closers before the eos are not content."""
    out, _ = compiled
    monkeypatch.setattr(rt, "SPECS", str(out / "specs"))
    kind = next(k for k in rt.TOOL_KINDS if k.name == "content_then_tool_call")
    for slug, parser in _parsers(out).items():
        case = rt.build_case(slug, kind)
        if case is None:
            continue
        text = case.full[len(case.prefix) :].split(EOS_PLACEHOLDER)[0]
        message = parser.parse(text, tools=case.tools)
        assert message["content"].strip() == kind.content.strip(), (slug, text, message)


def test_content_closer_is_not_a_stop_string(compiled):
    """A model that wraps its answer keeps writing (calls) after the closer: stopping
    there would cut them off."""
    out, _ = compiled
    for slug, parser in _parsers(out).items():
        content = parser.SPEC["content"]
        if content["start"] and content["mode"] != "wrapped_with_tools" and not parser.SPEC.get("messages"):
            # (a label opens the content and nothing closes it; in a turn of
            # messages, the message's end closes it)
            assert content["end"], slug
            assert content["end"] not in parser.STOP, slug


@pytest.mark.parametrize("slug", ["python_calls", "pyrepr_calls"])
def test_call_syntax_strings_with_escaped_quotes(compiled, monkeypatch, slug):
    """``name(key="…")`` calls whose strings the template escapes (tojson, or a macro
    of its own): a value holding ``\\"`` or a backslash ends at its own closing quote,
    not at the escaped one, in parse and in the stream at every chunking (the whole
    call stayed content)."""
    from tests.test_stream import chunkings, merge, stream

    out, _ = compiled
    monkeypatch.setattr(rt, "SPECS", str(out / "specs"))
    parser = _parsers(out)[slug]
    assert parser.SPEC["tools"]["arguments"]["string_escapes"] is True
    kind = next(k for k in rt.TOOL_KINDS if k.name == "tool_call_tricky_arguments")
    case = rt.build_case(slug, kind)
    assert case is not None and '\\"' in case.text
    passed, why = rt.check(case, parser.parse)
    assert passed, why
    whole = parser.parse(case.text, tools=case.tools)
    for name, cuts in chunkings(case.text, slug):
        fed, finished = stream(parser, case.text, cuts, tools=case.tools)
        assert merge(fed + finished) == whole, name


# A turn with content and calls that writes its content inside the calls' section
# (after its opener), or ends the turn after the content and opens a new one for the
# calls: the spec field that says so, and the content read back beside the calls.
ELSEWHERE = {"actions_preface": "content_in_section", "reopen_turn": "turn_break"}


@pytest.mark.parametrize("slug", sorted(ELSEWHERE))
def test_content_written_apart_from_the_calls(compiled, monkeypatch, slug):
    from tests.test_stream import chunkings, merge, stream, streamed

    out, _ = compiled
    monkeypatch.setattr(rt, "SPECS", str(out / "specs"))
    parser = _parsers(out)[slug]
    assert parser.SPEC["tools"].get(ELSEWHERE[slug]), parser.SPEC["tools"]
    kind = next(k for k in rt.TOOL_KINDS if k.name == "content_then_tool_call")
    case = rt.build_case(slug, kind)
    assert case is not None
    passed, why = rt.check(case, parser.parse)
    assert passed, why
    whole = parser.parse(case.text, tools=case.tools)
    assert whole["content"] == kind.content and len(whole["tool_calls"]) == 1
    for name, cuts in chunkings(case.text, slug):
        fed, finished = stream(parser, case.text, cuts, tools=case.tools)
        assert merge(fed + finished) == whole, name
    # The same text with the call broken: no call, and the markers between the
    # content and the call are content again (nothing is lost), in the stream too.
    trigger = parser.TRIGGERS[0]["value"]
    broken = case.text.replace('"Paris"', '"Paris', 1)
    message = parser.parse(broken, tools=case.tools)
    assert message["tool_calls"] == []
    assert trigger in message["content"] and kind.content in message["content"]
    for name, cuts in chunkings(broken, slug + "-broken"):
        fed, finished, abandoned = streamed(parser, broken, cuts, tools=case.tools)
        assert merge(fed + finished, abandoned) == message, name


def test_turn_break_without_calls_after_it_is_content(compiled):
    """The end of a turn and the header of the next with no call after them are
    text, in parse and in the stream; with a call after them they are dropped."""
    from tests.test_stream import chunkings, merge, stream

    out, _ = compiled
    parser = _parsers(out)["reopen_turn"]
    brk = parser.SPEC["tools"]["turn_break"]
    call = '<fn>{"name": "get_weather", "arguments": {"city": "Oslo"}}</fn>'
    for text, content in [
        ("Hi." + brk + "\nmore", "Hi." + brk + "\nmore"),
        ("Hi." + brk + "\nmore" + call, "Hi." + brk + "\nmore"),
        ("Hi.\n" + brk + "\n" + call, "Hi."),
        (brk + call, None),
    ]:
        message = parser.parse(text)
        assert message["content"] == content, text
        assert len(message["tool_calls"]) == (call in text), text
        for name, cuts in chunkings(text, text):
            fed, finished = stream(parser, text, cuts)
            assert merge(fed + finished) == message, (name, text)


def test_section_opener_before_content_is_no_content(compiled):
    """Where the content is written inside the section, the section's opener that
    starts the reply is a marker: dropped with calls after it or without."""
    from tests.test_stream import chunkings, merge, stream

    out, _ = compiled
    parser = _parsers(out)["actions_preface"]
    opener = parser.SPEC["tools"]["section"]["start"]
    call = '<do name="get_weather">{"city": "Oslo"}</do>\n'
    for text, content, calls in [
        (opener + "\nJust a note.", "Just a note.", 0),
        (opener + "\n" + call + "</actions>", None, 1),
        ("\n" + opener + "\nNote.\n" + call + call + "</actions>", "Note.", 2),
        ("Note first.\n" + call, "Note first.", 1),
    ]:
        message = parser.parse(text)
        assert (message["content"], len(message["tool_calls"])) == (content, calls), text
        for name, cuts in chunkings(text, text):
            fed, finished = stream(parser, text, cuts)
            assert merge(fed + finished) == message, (name, text)


def test_content_apart_from_the_calls_needs_markers_that_start_them(compiled):
    """The model refuses the two fields where no marker would start the calls
    (the trigger would be lost), naming the spec path."""
    import copy

    import yaml

    from compiler import model
    from compiler.spec import SpecError

    out, _ = compiled
    for slug, cut, path in [
        ("actions_preface", ("section", "start"), "tools.content_in_section"),
        ("actions_preface", ("call", "start"), "tools.content_in_section"),
        ("reopen_turn", ("call", "start"), "tools.turn_break"),
    ]:
        spec = yaml.safe_load((out / "specs" / f"{slug}.yaml").read_text(encoding="utf-8"))
        model.build(spec, slug=slug, origin=f"{slug}.yaml")  # as analysed: fine
        spec = copy.deepcopy(spec)
        section, key = cut
        spec["tools"][section][key] = None if section == "section" else ""
        with pytest.raises(SpecError, match=path.replace(".", r"\.")):
            model.build(spec, slug=slug, origin=f"{slug}.yaml")


def _openai_nested_cases(out, monkeypatch):
    monkeypatch.setattr(rt, "SPECS", str(out / "specs"))
    cases = [rt.build_case("openai_nested", kind) for kind in rt.ALL_KINDS]
    cases = [case for case in cases if case is not None]
    assert sum(len(case.kind.calls) > 1 for case in cases) >= 1
    return _parsers(out)["openai_nested"], cases


def test_openai_shaped_calls_read_back(compiled, monkeypatch):
    """Calls as the OpenAI API writes them (name and arguments in an object nested in
    the call's, after the id and type): every case reads back, in the stream at every
    chunking too, and a call cut short is abandoned, never passed on half-made."""
    from tests.test_stream import chunkings, merge, stream, streamed

    out, _ = compiled
    parser, cases = _openai_nested_cases(out, monkeypatch)
    for case in cases:
        passed, why = rt.check(case, parser.parse)
        assert passed, (case.kind.name, why)
        whole = parser.parse(case.text, tools=case.tools)
        for name, cuts in chunkings(case.text, case.kind.name):
            fed, finished = stream(parser, case.text, cuts, tools=case.tools)
            assert merge(fed + finished) == whole, (case.kind.name, name)
    both = next(case for case in cases if len(case.kind.calls) > 1)
    cut = both.text[: both.text.rindex('"arguments"')]
    message = parser.parse(cut, tools=both.tools)
    assert len(message["tool_calls"]) == 1
    for name, cuts in chunkings(cut, "openai_nested-cut"):
        fed, finished, abandoned = streamed(parser, cut, cuts, tools=both.tools)
        assert merge(fed + finished, abandoned) == message, name


def test_openai_shaped_calls_lark(compiled, monkeypatch):
    """llguidance accepts the module's Lark grammar on every round-trip text, and on
    the same calls with their members in another order at both levels; it refuses a
    call without its name and a call to a tool not offered."""
    from tests.test_lark import accepts, why_rejected

    out, _ = compiled
    parser, cases = _openai_nested_cases(out, monkeypatch)
    for case in cases:
        grammar = parser.lark_grammar(tools=case.tools, enable_thinking=case.kind.enable_thinking)
        assert accepts(grammar, case.text), (case.kind.name, why_rejected(grammar, case.text))
    one = next(case for case in cases if case.kind.name == "tool_call")
    grammar = parser.lark_grammar(tools=one.tools)
    start, end = one.text.index("[") + 1, one.text.rindex("]")
    call = json.loads(one.text[start:end])
    call["function"] = dict(reversed(call["function"].items()))
    for order in (["function", "id", "type"], ["type", "function"], ["id", "function", "type"]):
        moved = {key: call[key] for key in order}
        text = one.text[:start] + json.dumps(moved) + one.text[end:]
        assert accepts(grammar, text), (order, why_rejected(grammar, text))
    nameless = {"function": {"arguments": call["function"]["arguments"]}}
    for refused in (json.dumps(nameless), one.text[start:end].replace("get_weather", "get_stocks")):
        assert not accepts(grammar, one.text[:start] + refused + one.text[end:]), refused
def test_a_thinking_switch_of_another_name_reads_reasoning(compiled):
    """deliberate_switch writes reasoning back only where its own `deliberate` is
    on (as Hermes 4's `thinking`): the analysis finds the switch, records it, and
    reads the block it shows; enable_thinking stands for it."""
    from tests.test_stream import chunkings, merge, stream

    out, _ = compiled
    parser = _parsers(out)["deliberate_switch"]
    assert parser.SPEC["capabilities"]["thinking_switch"] == {
        "variables": {"deliberate": {"thinking_on": True, "thinking_off": False}},
        "default": "thinking_off",
    }
    assert "switched by the template's deliberate (True on, False off)" in parser.__doc__
    call = '<tool_request>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_request>'
    for text, reasoning, content in [
        ("<musing>\nIt may rain.\n</musing>\nTake an umbrella.<|close|>", "It may rain.", "Take an umbrella."),
        ("<musing>\nOslo, then.\n</musing>\n" + call, "Oslo, then.", None),
        ("Take an umbrella.", None, "Take an umbrella."),
    ]:
        for thinking in (True, False):
            message = parser.parse(text, enable_thinking=thinking)
            assert (message["reasoning_content"], message["content"]) == (reasoning, content), text
            assert len(message["tool_calls"]) == (call in text)
            for name, cuts in chunkings(text, text):
                fed, finished = stream(parser, text, cuts, enable_thinking=thinking)
                assert merge(fed + finished) == message, (name, text)


def test_an_answer_label_written_only_with_tools_is_no_content(compiled):
    """tool_label writes 答复： before an answer only where tools are given (as
    Hunyuan's 助手：): the analysis renders the answer with tools too, and the label
    is the content's opener, read where it is written and not required."""
    from tests.test_stream import chunkings, merge, stream

    out, _ = compiled
    parser = _parsers(out)["tool_label"]
    assert parser.SPEC["content"] == {"mode": "wrapped_with_tools", "start": "答复：", "end": None}
    call = '<calls>[{"name": "get_weather", "arguments": {"city": "Oslo"}}]</calls>'
    for text, content in [
        ("答复：It is sunny.<|reply_end|>", "It is sunny."),
        ("It is sunny.", "It is sunny."),
        ("答复：Let me check." + call, "Let me check."),
        (call, None),
        ("Say 答复： first.", "Say 答复： first."),
    ]:
        message = parser.parse(text)
        assert message["content"] == content, text
        assert len(message["tool_calls"]) == (call in text), text
        for name, cuts in chunkings(text, text):
            fed, finished = stream(parser, text, cuts)
            assert merge(fed + finished) == message, (name, text)


def _plugin_functions(out, server: str, slug: str, names: tuple[str, ...]) -> dict:
    """The plugin's top-level functions and constants ``names``, run on the format's
    module (the plugin imports its server at the top: only these are run here)."""
    import ast
    import importlib

    import yaml

    from compiler import model
    from compiler.codegen.module import standalone

    spec = yaml.safe_load((out / "specs" / f"{slug}.yaml").read_text(encoding="utf-8"))
    fmt = model.build(spec, slug=slug, origin=f"{slug}.yaml")
    text = importlib.import_module(f"compiler.codegen.plugin_{server}").text(
        fmt, standalone(fmt), slug
    )
    tree = ast.parse(text)
    wanted = [
        node for node in tree.body
        if getattr(node, "name", None) in names
        or (isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) in names)
    ]
    namespace = {"fmt": _parsers(out)[slug]}
    exec(compile(ast.Module(body=wanted, type_ignores=[]), "plugin", "exec"), namespace)
    return namespace


# (slug, the request's chat-template arguments, the setting the vLLM plugin reads)
REQUESTS = [
    ("deliberate_switch", {}, None),  # none given: the template's default (off)
    ("deliberate_switch", {"enable_thinking": True}, None),  # the template ignores it
    ("deliberate_switch", {"deliberate": True}, True),
    ("deliberate_switch", {"deliberate": False}, False),
    ("skip_weighing", {"skip_reasoning": True}, False),  # true turns thinking off
    ("skip_weighing", {"skip_reasoning": False}, True),
    ("role_sep_think", {"force_reasoning": True}, True),
    ("role_sep_think", {"skip_reasoning": True}, False),
    ("role_sep_think", {"force_reasoning": False}, None),  # renders as though not given
    ("mull_undecided", {}, None),
    ("mull_undecided", {"enable_thinking": False}, False),
    ("jot_training", {"for_training": True}, None),  # no switch at all
]


@pytest.mark.parametrize("slug,given,setting", REQUESTS)
def test_the_vllm_plugin_passes_the_request_s_setting_only_where_it_gives_one(
    compiled, slug, given, setting
):
    """The setting is read under the template's own names and polarity, from the
    chat-template arguments vLLM hands the parser (its --default-chat-template-kwargs
    merged in); a request that gives none leaves it to the template's default."""
    out, _ = compiled
    thinking = _plugin_functions(out, "vllm", slug, ("_SWITCH", "_thinking"))["_thinking"]
    assert thinking(given) is setting


# (slug, how the prompt the server rendered ends, the request's setting, the setting
# the vLLM plugin reads the output with)
PROMPTS = [
    ("mull_undecided", "<|role=assistant|>\n<mull>\n", None, True),
    ("mull_undecided", "<|role=assistant|>\n<mull>\n\n</mull>\n\n", None, False),
    ("mull_undecided", "<|role=assistant|>\n", None, False),  # opens nothing
    ("reverie_off_default", "<|hdr|>assistant\n<reverie>\n", False, True),  # the prompt wins
    ("reverie_off_default", "<|hdr|>assistant\n", None, False),
]


@pytest.mark.parametrize("slug,prompt,asked,setting", PROMPTS)
def test_the_vllm_plugin_lets_the_prompt_decide_where_vllm_hands_it_over(
    compiled, slug, prompt, asked, setting
):
    """vLLM hands a reasoning parser the rendered prompt (set_prompt_token_ids): its
    end says whether the output starts inside the block, over the request's setting
    and the template's default."""
    out, _ = compiled
    spec = _parsers(out)[slug].SPEC
    starts = (spec["reasoning"]["start"],)
    namespace = _plugin_functions(out, "vllm", slug, ("_from_prompt",))
    namespace.update(REASONING_STARTS=starts, REASONING_END=spec["reasoning"]["end"])
    assert namespace["_from_prompt"](prompt, asked, False) is setting


@pytest.mark.parametrize(
    "slug,mode,readings",
    [
        # on unless set false: force_reasoning False is a request's false
        ("skip_weighing", None, {None: None, True: None, False: None}),
        ("reverie_off_default", "explicit_enable_thinking", {None: None, True: True, False: None}),
        ("mull_undecided", "explicit_enable_thinking", {None: None, True: True, False: None}),
        ("deliberate_switch", None, {None: None, True: None, False: None}),
    ],
)
def test_the_sglang_plugin_reads_force_reasoning_by_the_template_s_switch(
    compiled, slug, mode, readings
):
    """SGLang hands a reasoning detector only force_reasoning, which it works out from
    enable_thinking or thinking with the detector's reasoning_default: the plugin sets
    that from the spec's switch and default, and reads force_reasoning back as the
    setting it stands for (None: the template's default decides)."""
    out, _ = compiled
    namespace = _plugin_functions(out, "sglang", slug, ("_SWITCH", "_sglang_mode", "SGLANG_MODE", "_setting"))
    assert namespace["SGLANG_MODE"] == mode
    assert {given: namespace["_setting"](given) for given in readings} == readings


def test_relay_messages_reads_a_turn_of_several_messages(compiled):
    """relay_messages writes a turn as messages, each `<|m|>bot` + header + `<|body|>`
    (as harmony does): the analysis finds the opener, the header's end and the
    message end (messages), and the reader takes messages in the orders a model
    writes them: the recipient after the lane, content after calls, two messages of
    content, a preamble on another lane where a reviewed override names it."""
    from compiler import model
    from compiler.codegen.module import load
    from compiler.spec import apply_overrides
    from tests.test_stream import chunkings, merge, streamed

    import yaml

    out, _ = compiled
    parser = _parsers(out)["relay_messages"]
    assert parser.SPEC["messages"] == {"opener": "<|m|>bot", "header_end": "<|body|>", "end": "<|stop|>"}
    spec = yaml.safe_load((out / "specs" / "relay_messages.yaml").read_text(encoding="utf-8"))
    body = {key: value for key, value in spec.items() if key != "overrides"}
    preamble = {"path": "messages.content_also", "value": ["<|lane|>action<|body|>"],
                "reason": "test", "evidence": "this test"}
    patched, _ = apply_overrides(body, [preamble], "relay_messages.yaml")
    fmt = model.build(patched, slug="relay_with_preamble", origin="relay_messages.yaml")
    with_preamble = load(fmt)

    def call(name, city, order=False):
        header = f"<|lane|>action for=tools.{name} json" if order else f" for=tools.{name}<|lane|>action json"
        return header + '<|body|>{"city": "' + city + '"}<|invoke|>'

    think = "<|lane|>scratch<|body|>Plan.<|stop|><|m|>bot"
    for module, text, reasoning, content, calls in [
        (parser, call("get_weather", "Oslo", order=True), None, None, ["Oslo"]),
        (parser, think + call("get_weather", "Oslo", order=True), "Plan.", None, ["Oslo"]),
        (parser, call("get_weather", "Oslo") + "<|m|>bot" + call("get_weather", "Rome", order=True),
         None, None, ["Oslo", "Rome"]),
        (parser, call("get_weather", "Oslo") + "<|m|>bot<|lane|>reply<|body|>Sunny.<|done|>",
         None, "Sunny.", ["Oslo"]),
        (parser, "<|lane|>reply<|body|>One.<|stop|><|m|>bot<|lane|>reply<|body|>Two.<|done|>",
         None, "One.\nTwo.", []),
        (with_preamble, think + "<|lane|>action<|body|>Let me look.<|stop|><|m|>bot"
         + call("get_weather", "Oslo", order=True), "Plan.", "Let me look.", ["Oslo"]),
        # what is no message's header stays as written
        (parser, "<|lane|>reply<|body|>Say <|m|>bot if you like.<|done|>", None,
         "Say <|m|>bot if you like.", []),
    ]:
        message = module.parse(text)
        got = [json.loads(c["function"]["arguments"])["city"] for c in message["tool_calls"]]
        assert (message["reasoning_content"], message["content"], got) == (reasoning, content, calls), text
        for name, cuts in chunkings(text, text):
            fed, finished, abandoned = streamed(module, text, cuts)
            assert merge(fed + finished, abandoned) == message, (name, text)


def _read(parser, text, **options):
    """``parse``'s message, which the stream gives too at every chunking."""
    from tests.test_stream import chunkings, merge, streamed

    message = parser.parse(text, **options)
    for name, cuts in chunkings(text, text):
        fed, finished, abandoned = streamed(parser, text, cuts, **options)
        assert merge(fed + finished, abandoned) == message, (name, text, options)
    return message


# slug → its capabilities.thinking_switch: the invented templates of each kind of switch
SWITCHES = {
    # thinking off unless asked for: the prompt opens the block only with it
    "reverie_off_default": {
        "variables": {"enable_thinking": {"thinking_on": True, "thinking_off": False}},
        "default": "thinking_off",
    },
    # its own switch, whose true turns thinking off
    "skip_weighing": {
        "variables": {"skip_reasoning": {"thinking_on": False, "thinking_off": True}},
        "default": "thinking_on",
    },
    # two switches of its own, each one way; with neither the model picks
    "role_sep_think": {
        "variables": {"force_reasoning": {"thinking_on": True}, "skip_reasoning": {"thinking_off": True}},
        "default": "undecided",
    },
    # not given, the prompt neither opens nor closes the block
    "mull_undecided": {
        "variables": {"enable_thinking": {"thinking_on": True, "thinking_off": False}},
        "default": "undecided",
    },
}


@pytest.mark.parametrize("slug", sorted(SWITCHES))
def test_the_switch_and_the_default_are_read_off_the_renders(compiled, slug):
    out, _ = compiled
    assert _parsers(out)[slug].SPEC["capabilities"]["thinking_switch"] == SWITCHES[slug]


def test_a_boolean_that_changes_no_prompt_is_no_switch(compiled):
    """jot_training writes a turn's reasoning back only for training (for_training):
    the generation prompt is the same either way, so no request's value of it
    changes what the model writes, and no setting is read from it."""
    out, _ = compiled
    parser = _parsers(out)["jot_training"]
    assert "thinking_switch" not in parser.SPEC["capabilities"]
    message = _read(parser, "Hmm.\n</jot>\nIt is 42.<|fin_turn|>")
    assert (message["reasoning_content"], message["content"]) == ("Hmm.", "It is 42.")


# (slug, enable_thinking, output, (reasoning, content, calls)): None is a request that
# gives no switch, read as the template's default has it
OUTPUTS = [
    # off by default: a plain answer is the answer (parse assumed the block open)
    ("reverie_off_default", None, "It is sunny.<|over|>", (None, "It is sunny.", 0)),
    ("reverie_off_default", None, "<reverie>\nRain?\n</reverie>\nTake an umbrella.", ("Rain?", "Take an umbrella.", 0)),
    ("reverie_off_default", True, "Rain?\n</reverie>\nTake an umbrella.", ("Rain?", "Take an umbrella.", 0)),
    ("reverie_off_default", True, "Still thinking", ("Still thinking", None, 0)),
    # reversed: enable_thinking=True is skip_reasoning=False, whose prompt opens the block
    ("skip_weighing", True, "Plan.\n</weigh>\nGo.", ("Plan.", "Go.", 0)),
    ("skip_weighing", None, "Plan.\n</weigh>\nGo.", ("Plan.", "Go.", 0)),
    ("skip_weighing", False, "Go.<|yield|>", (None, "Go.", 0)),
    # force_reasoning opens the reasoning message, skip_reasoning the answer's
    ("role_sep_think", True, "Plan.<|turn_end|>\n<|turn|>assistant<|role_sep|>Go.", ("Plan.", "Go.", 0)),
    ("role_sep_think", False, "Go.<|turn_end|>", (None, "Go.", 0)),
    # with neither, the model names the message itself
    ("role_sep_think", None, "<|role_sep|>Go.<|turn_end|>", (None, "Go.", 0)),
    ("role_sep_think", None, "/think<|role_sep|>Plan.<|turn_end|>\n<|turn|>assistant<|role_sep|>Go.",
     ("Plan.", "Go.", 0)),
    # undecided: a block where its closer comes, an answer where none does
    ("mull_undecided", None, "It is 42.<|halt|>", (None, "It is 42.", 0)),
    ("mull_undecided", None, "Six sevens.\n</mull>\n\nIt is 42.", ("Six sevens.", "It is 42.", 0)),
    ("mull_undecided", None, "<mull>\nSix sevens.\n</mull>\n\nIt is 42.", ("Six sevens.", "It is 42.", 0)),
    ("mull_undecided", None, '<tool>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool>', (None, "", 1)),
    ("mull_undecided", None, 'Oslo, then.\n</mull>\n\n<tool>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool>',
     ("Oslo, then.", "", 1)),
    ("mull_undecided", True, "Six sevens, and", ("Six sevens, and", None, 0)),
    ("mull_undecided", False, "It is 42.", (None, "It is 42.", 0)),
]


@pytest.mark.parametrize("slug,thinking,text,expected", OUTPUTS)
def test_outputs_read_by_the_switch_s_setting_and_the_default(compiled, slug, thinking, text, expected):
    out, _ = compiled
    parser = _parsers(out)[slug]
    options = {} if thinking is None else {"enable_thinking": thinking}
    message = _read(parser, text, **options)
    reasoning, content, calls = expected
    assert message["reasoning_content"] == reasoning, message
    assert (message["content"] or None) == (content or None), message
    assert len(message["tool_calls"]) == calls, message


def test_invented_templates_round_trip_without_the_switch(compiled, monkeypatch):
    """The acceptance of tests/test_default_thinking.py on the invented templates:
    rendered with the switch undefined and parsed without it, each case reads as
    with the recorded default given, and passes the round trip wherever that does."""
    from tests import test_default_thinking as unswitched

    out, _ = compiled
    monkeypatch.setattr(rt, "SPECS", str(out / "specs"))
    unswitched.standing_for_default.cache_clear()
    parsers = _parsers(out)
    failures, count = [], 0
    try:
        for slug, parser in parsers.items():
            for kind in rt.UNSWITCHED_KINDS:
                if rt.build_case(slug, kind) is None:
                    continue
                count += 1
                why = unswitched.check(slug, kind, parser.parse)
                if why is not None:
                    failures.append(f"{slug}/{kind.name}: {why[:300]}")
    finally:
        unswitched.standing_for_default.cache_clear()
    assert count >= 150
    assert len(failures) <= 1, "\n".join(failures)


@pytest.mark.parametrize("slug", ["mull_undecided", "role_sep_think"])
def test_the_undecided_default_s_grammars_admit_both_readings(compiled, slug):
    """grammar() and lark_grammar() without enable_thinking, for an undecided
    default: they admit each output above that parse reads as well-formed, a block
    where its closer comes and an answer where none does."""
    from tests.test_grammar import accepts, why_rejected
    from tests.test_lark import accepts as lark_accepts

    out, _ = compiled
    parser = _parsers(out)[slug]
    texts = [text for name, thinking, text, _ in OUTPUTS if name == slug and thinking is None]
    assert texts
    for text in texts:
        parser.parse(text, strict=True)
        grammar = parser.grammar()
        assert accepts(grammar, text, slug), why_rejected(grammar, text)
        assert lark_accepts(parser.lark_grammar(), text), text
