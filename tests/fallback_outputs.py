"""Hand-written outputs of the formats whose template writes no calls, which read calls
in our fallback format (spec ``polyfills.fallback_call``, model.Format.fallback): the
round trip cannot render a call for them, so the grammar tests write the calls as
``prepare_messages``' instructions ask for them (the call's object between the
spec's two markers) and keep only the texts that ``parse`` reads back, strictly, as
the calls and content meant.
"""

from __future__ import annotations

import functools
import json
import os
from dataclasses import dataclass

from compiler import model
from tests import roundtrip as rt

WEATHER, TIME = rt.TOOLS["get_weather"], rt.TOOLS["get_time"]
TOOLS = [WEATHER, TIME]
CONTENT = "Let me look that up for you."


@functools.cache
def format_of(slug: str) -> model.Format:
    """The typed model of a generated module's spec."""
    origin = os.path.join(rt.SPECS, f"{slug}.yaml")
    return model.build(rt.module(slug).SPEC, slug=slug, origin=origin)


def fallback_slugs() -> list[str]:
    return [slug for slug in rt.slugs() if format_of(slug).fallback]


@dataclass(frozen=True)
class Output:
    name: str
    text: str
    calls: tuple[str, ...]  # the names of the calls parse reads in it
    end: str  # the fallback call's closing marker


def _call(slug: str, name: str, arguments: dict) -> str:
    fallback = format_of(slug).polyfills.fallback_call
    assert fallback is not None
    start, end = fallback
    return start + json.dumps({"name": name, "arguments": arguments}) + end


def _reads_back(slug: str, text: str, calls: tuple[str, ...], content: str) -> bool:
    try:
        message = rt.module(slug).parse(text, tools=TOOLS, strict=True)
    except ValueError:
        return False
    names = tuple(call["function"]["name"] for call in message["tool_calls"])
    return names == calls and (message["content"] or "").strip() == content


@functools.cache
def outputs(slug: str) -> dict[str, Output]:
    """The outputs of ``slug`` by name: one call, content then a call, two calls. Where
    the prompt opens a reasoning block a call must come after it closes (a strict
    reading refuses calls inside it), the block is closed first."""
    fmt = format_of(slug)
    assert fmt.polyfills.fallback_call is not None
    end = fmt.polyfills.fallback_call[1]
    weather = _call(slug, "get_weather", {"city": "Tokyo"})
    time = _call(slug, "get_time", {"timezone": "Asia/Tokyo"})
    wanted = {
        "one_call": (weather, ("get_weather",), ""),
        "content_then_call": (f"{CONTENT}\n{weather}", ("get_weather",), CONTENT),
        "two_calls": (f"{weather}\n{time}", ("get_weather", "get_time"), ""),
    }
    found = {}
    closer = fmt.reasoning.end if fmt.reasoning.has_block else ""
    for name, (text, calls, content) in wanted.items():
        for written in [text] + ([f"Thinking it over.{closer}\n\n{text}"] if closer else []):
            if _reads_back(slug, written, calls, content):
                found[name] = Output(name, written, calls, end)
                break
    return found


def broken(output: Output) -> str:
    """The output with its last call's closing marker broken (a middle character)."""
    at = output.text.rfind(output.end.strip())
    assert at >= 0
    middle = at + len(output.end.strip()) // 2
    return output.text[:middle] + "#" + output.text[middle + 1 :]


@functools.cache
def without_fallback(slug: str):
    """``slug``'s module generated (in memory) as if it read no fallback calls: every
    corpus format reads calls now, so this is how a module without any is had. A
    fallback format's spec with the polyfills that write calls switched off."""
    import copy

    from compiler.codegen.module import load

    spec = copy.deepcopy(rt.module(slug).SPEC)
    spec["polyfills"].update(fallback_call=None, tool_definitions=False, tool_calls=False)
    fmt = model.build(spec, slug=slug, origin=f"specs/{slug}.yaml")
    assert not fmt.has_calls
    return load(fmt)
