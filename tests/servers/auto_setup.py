"""What the auto plugin's server tests share: model folders a server can load a tokenizer
from (the chat template, the special tokens, a tokenizer of a few words: no weights),
a start-up cache per server, a start-up made fresh as in a new server process,
and the start-up times for docs/serving.md.

Each server's tests have a cache of their own, so each times its first start
(the analysis), its second (the cached analysis) and a reviewed spec's.
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import yaml

from compiler.codegen import auto_start
from compiler.render import ChatTemplate, RenderInputs
from tests import roundtrip as rt

ROOT = Path(__file__).resolve().parents[2]
SPECS = ROOT / "specs"
INVENTED = ROOT / "tests" / "invented" / "muse_invoke.jinja"
# A chat template with no tools and no reasoning: the plugin has nothing to read.
PLAIN = (
    "{%- for message in messages -%}"
    "{{- '<|' + message.role + '|>\\n' + message.content + '<|end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|assistant|>\\n' -}}{%- endif -%}"
)
BROKEN = "{% if messages %}{{ messages[0].content }"


@functools.cache
def workdir() -> Path:
    """The session's folder of models, caches and plugin files (some 100 MB), removed
    when the session ends."""
    folder = Path(tempfile.mkdtemp(prefix="chatfmt-auto-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


def cache(server: str) -> Path:
    """The server's start-up cache: its own, so that each server's tests time its
    start-ups from nothing (a first start analyses; the second reuses the analysis)."""
    return workdir() / f"cache-{server}"


@functools.cache
def corpus() -> dict[str, Path]:
    """Each corpus spec's slug → its template file (the spec records it relative to
    itself)."""
    found = {}
    for path in sorted(SPECS.glob("*.yaml")):
        recorded, digest = _recorded(path)
        template = (SPECS / recorded).resolve()
        assert auto_start.sha256(template.read_text(encoding="utf-8")) == digest, path
        found[path.stem] = template
    return found


def cached(server: str, template: Path) -> bool:
    """Whether the server's cache holds an analysis of ``template`` already."""
    digest = auto_start.sha256(template.read_text(encoding="utf-8"))
    return any(cache(server).glob(f"{digest}-*/spec.yaml"))


def reviewed_for(slug: str) -> str:
    """The slug of the first spec by name recorded for ``slug``'s template."""
    digest = auto_start.sha256(corpus()[slug].read_text(encoding="utf-8"))
    return next(
        other
        for other, template in corpus().items()
        if auto_start.sha256(template.read_text(encoding="utf-8")) == digest
    )


def _recorded(spec: Path) -> tuple[str, str]:
    """The template's path and sha256 a spec records."""
    template = yaml.safe_load(spec.read_text(encoding="utf-8"))["template"]
    return template["path"], template["sha256"]


def model_folder(name: str, template: str, bos: str | None = None, eos: str | None = None) -> Path:
    """A model folder whose tokenizer has ``template`` as its chat template (in
    chat_template.jinja, as current models ship it) and ``bos``/``eos``."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    folder = workdir() / "models" / name
    if folder.exists():
        return folder
    folder.mkdir(parents=True)
    special = [token for token in (bos, eos) if token]
    vocabulary = {"<unk>": 0, **{token: at + 1 for at, token in enumerate(special)}}
    tokenizer = Tokenizer(models.WordLevel(vocabulary, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.add_special_tokens(special)
    tokenizer.save(str(folder / "tokenizer.json"))
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": bos, "eos_token": eos}
    (folder / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    (folder / "chat_template.jinja").write_text(template, encoding="utf-8")
    # A model type, so that the servers' configuration readers do not retry.
    (folder / "config.json").write_text('{"model_type": "llama"}', encoding="utf-8")
    return folder


def corpus_model(slug: str) -> Path:
    """The corpus template's model: no bos or eos, as every corpus spec renders it."""
    return model_folder(slug, corpus()[slug].read_text(encoding="utf-8"))


def fresh(name: str, stem: str) -> None:
    """Forget a start-up of the plugin registered as ``name`` from the file ``stem``.py,
    as a new server process would not have it: no parser handed on, no module loaded."""
    os.environ.pop(auto_start.handoff_variable(name), None)
    for module in (stem, f"{stem}_format", f"{stem}_start"):
        sys.modules.pop(module, None)


# What the start-up's one line says, by how it started.
HOW = {
    "analysed the chat template": "analysed",
    "reusing the unreviewed spec": "cached",
    "serving the reviewed spec": "reviewed",
    "refusing to start": "refused",
}


def start_line(err: str) -> str:
    """The one line that says how the start-up went (the SGLang launcher may log a
    parser flag it took out too)."""
    lines = [
        line
        for line in err.splitlines()
        if line.startswith("chatfmt: ") and any(phrase in line for phrase in HOW)
    ]
    assert len(lines) == 1, err[-3000:]
    return lines[0]


def how(line: str) -> str:
    for phrase, said in HOW.items():
        if phrase in line:
            return said
    raise AssertionError(f"an unknown start-up line: {line}")


# Start-up times: server → how → [(slug, seconds)].
TIMES: dict[str, dict[str, list[tuple[str, float]]]] = {}


class timed:
    """A start-up, timed into TIMES once its line says how it went."""

    def __init__(self, server: str, slug: str) -> None:
        self.server, self.slug = server, slug

    def __enter__(self) -> timed:
        self.began = time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        self.seconds = time.perf_counter() - self.began

    def record(self, line: str, again: bool = False) -> str:
        """How it went, from its line; timed under that (and "again" for a second
        start that reads what the first wrote)."""
        said = how(line)
        times = TIMES.setdefault(self.server, {})
        times.setdefault(said + (", again" if again else ""), []).append((self.slug, self.seconds))
        analysis = re.search(r"analysed the chat template in ([0-9.]+) s", line)
        if analysis:  # the compiler's analysis alone, as the line says it
            times.setdefault("(analysis alone)", []).append((self.slug, float(analysis[1])))
        return said


def figures(server: str) -> str:
    """The start-up times of one server's tests, one line per way it started."""
    lines = []
    for said, times in sorted(TIMES.get(server, {}).items()):
        seconds = sorted(time for _, time in times)
        slowest = max(times, key=lambda item: item[1])
        lines.append(
            f"{server} {said}: {len(seconds)} starts, median {statistics.median(seconds):.2f} s, "
            f"max {seconds[-1]:.2f} s ({slowest[0]})"
        )
    return "\n".join(lines)


def writes_nothing(slug: str) -> bool:
    """Whether the corpus format has neither the template's own calls (calls only in
    the compiler's fallback format do not count) nor reasoning: the plugin refuses it."""
    module = rt.module(slug)
    return not vars(module).get("HAS_REASONING") and module.SPEC["tools"]["format"] == "none"


# --- the invented template -----------------------------------------------------------------

WEATHER = rt.TOOLS["get_weather"]
# Its tokenizer's bos and eos: the end of a turn is the eos token.
INVENTED_TOKENS = ("<s>", "<|end-of-reply|>")


def invented_cases() -> list[tuple[str, dict]]:
    """(what the model wrote, the message the template rendered it from): the template
    is the oracle."""
    template = ChatTemplate(
        INVENTED.read_text(encoding="utf-8"), "muse_invoke", RenderInputs(*INVENTED_TOKENS, {})
    )
    history = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Weather?"}]

    def call(city: str, index: int) -> dict:
        arguments = {"city": city, "unit": "celsius"}
        return {"id": f"c{index}", "type": "function",
                "function": {"name": "get_weather", "arguments": arguments}}

    messages = [
        {"content": "It is sunny in Paris."},
        {"reasoning_content": "The user wants the weather.\nNo call.", "content": "Sunny."},
        {"content": None, "tool_calls": [call("Paris", 1)]},
        {"content": "Let me look.", "tool_calls": [call("Paris", 1)]},
        {"reasoning_content": "Two cities.", "content": None,
         "tool_calls": [call("Paris", 1), call('Zürich "old town"', 2)]},
    ]
    end = INVENTED_TOKENS[1] + "\n"
    found = []
    for message in messages:
        prefix = template.render(history, tools=[WEATHER], add_generation_prompt=True)
        full = template.render(history + [{"role": "assistant", **message}], tools=[WEATHER])
        assert full.startswith(prefix) and full.endswith(end)
        found.append((full[len(prefix) : -len(end)], message))
    return found


def as_sent(message: dict) -> dict:
    """A message as the servers' tests merge what a server sent."""
    return {
        "content": message.get("content") or None,  # none is None, as OpenAI sends it
        "reasoning": message.get("reasoning_content"),
        "calls": [
            [call["function"]["name"], call["function"]["arguments"]]
            for call in message.get("tool_calls") or ()
        ],
    }


def same_message(got: dict, want: dict) -> bool:
    """Content and reasoning equal, the calls' names equal and arguments equal as JSON."""
    return (
        (got["content"], got["reasoning"]) == (want["content"], want["reasoning"])
        and [name for name, _ in got["calls"]] == [name for name, _ in want["calls"]]
        and all(
            rt.json_equal(json.loads(arguments), wanted)
            for (_, arguments), (_, wanted) in zip(got["calls"], want["calls"], strict=True)
        )
    )
