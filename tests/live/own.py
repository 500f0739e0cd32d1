"""The model's own template, and the README's live example.

``check_own_template``: the GGUF compiled as a user compiles theirs (``chatfmt build
--source FILE.gguf``: template, bos/eos and token table from the file) into a folder
of its own under .cache/live; then

- every token id the spec records (bos, eos, the end-of-turn tokens, the markers)
  is the tokenizer's id for that text, and decodes back to it; so are the module's
  ``TOKEN_IDS``, ``BOS_TOKEN_ID`` and ``EOS_TOKEN_IDS``;
- the model answers ``PROMPTS`` unconstrained (greedy, ``CAP`` tokens at most); each
  output's token pieces (with and without its end-of-sequence token, as a server may
  keep it or not) fed one by one to ``StreamParser`` give ``parse``'s message, and
  the content holds no marker.

``check_readme_example``: the README's section ``README_SECTION`` run as written, as
tests/test_readme.py runs the quick start (a shown output must be printed exactly).
"""

from __future__ import annotations

import importlib
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from tests.live import reading
from tests.live.decode import decode
from tests.live.model import CACHE, ROOT, Loaded, gguf_path

PROMPTS = [
    "What is the capital of France?",
    "Write a haiku about the sea.",
    "List three prime numbers, separated by commas.",
]
CAP = 48
OWN = CACHE / "own"
README_SECTION = "## A real model calls a tool"


def build_own(folder: Path = OWN) -> tuple[Path, Path]:
    """(the spec, the generated folder) of the GGUF, built by the command line."""
    specs, generated = folder / "specs", folder / "generated"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "compiler",
            "build",
            "--source",
            str(gguf_path()),
            "--specs",
            str(specs),
            "--generated",
            str(generated),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(
            f"chatfmt build --source GGUF failed:\n{done.stderr[-2000:]}"
        )
    found = sorted(specs.glob("*.yaml"))
    if len(found) != 1:
        raise RuntimeError(f"chatfmt build wrote {len(found)} specs in {specs}")
    return found[0], generated


def import_generated(generated: Path, slug: str):
    """The module ``slug`` of a generated folder (not a package: on sys.path)."""
    if str(generated) not in sys.path:
        sys.path.insert(0, str(generated))
    return importlib.import_module(slug)


def token_problems(spec: dict, module, loaded: Loaded) -> list[str]:
    """Where the spec's or the module's token ids are not the tokenizer's."""
    tokenizer = loaded.tokenizer
    problems = []
    tokens = spec.get("tokens")
    if not tokens:
        return ["the spec has no tokens section: the GGUF's token table was not read"]
    entries = [("bos", tokens.get("bos")), ("eos", tokens.get("eos"))]
    entries += [("eos_tokens", entry) for entry in tokens.get("eos_tokens") or ()]
    entries += [("markers", entry) for entry in tokens.get("markers") or ()]
    for where, entry in entries:
        if not entry:
            continue
        text, number = entry["text"], entry["id"]
        if tokenizer.convert_tokens_to_ids(text) != number:
            problems.append(
                f"tokens.{where}: {text!r} is id {tokenizer.convert_tokens_to_ids(text)}"
                f" in the tokenizer, {number} in the spec"
            )
        if tokenizer.decode([number], skip_special_tokens=False) != text:
            problems.append(
                f"tokens.{where}: id {number} decodes otherwise than {text!r}"
            )
    for text, number in module.TOKEN_IDS.items():
        if tokenizer.convert_tokens_to_ids(text) != number:
            problems.append(f"TOKEN_IDS[{text!r}] = {number}, not the tokenizer's")
    if module.BOS_TOKEN_ID != tokenizer.bos_token_id:
        problems.append(
            f"BOS_TOKEN_ID {module.BOS_TOKEN_ID} vs {tokenizer.bos_token_id}"
        )
    if loaded.eos_id not in module.EOS_TOKEN_IDS:
        problems.append(f"EOS_TOKEN_IDS {module.EOS_TOKEN_IDS} lack {loaded.eos_id}")
    return problems


def check_own_template(loaded: Loaded) -> tuple[list[str], list[str]]:
    """(what fails in the model's own template's checks (module docstring), a line
    for the table per answer)."""
    answers: list[str] = []
    try:
        spec_path, generated = build_own()
    except (RuntimeError, subprocess.TimeoutExpired) as error:
        return [f"own template: {error}"], answers
    spec = yaml.safe_load(spec_path.read_text(encoding="utf-8"))
    module = import_generated(generated, spec_path.stem)
    problems = [
        f"own template: {line}" for line in token_problems(spec, module, loaded)
    ]
    tokenizer = loaded.tokenizer
    markers = {
        *module.PRESERVED_TOKENS,
        *module.STOP,
        tokenizer.bos_token,
        tokenizer.eos_token,
    }
    for question in PROMPTS:
        messages = [{"role": "user", "content": question}]
        prompt = tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, tokenize=False
        )
        prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        decoded = decode(loaded, prompt_ids, [], CAP)
        answer = loaded.tokenizer.decode(decoded.output_ids, skip_special_tokens=False)
        answers.append(
            f"{question!r}: {answer!r} ({len(decoded.ids)} tokens"
            + (", capped)" if not decoded.ended else ")")
        )
        for kept in (False, True):
            ids = decoded.output_ids if kept else decoded.text_ids
            texts = reading.pieces(loaded, prompt_ids, ids)
            message, differs = reading.stream_vs_parse(
                module, texts, tools=None, enable_thinking=None
            )
            where = f"own template, {question!r}" + (" (eos kept)" if kept else "")
            problems += [f"{where}: stream: {line}" for line in differs]
            content = message["content"] or ""
            left = sorted(marker for marker in markers if marker and marker in content)
            if left:
                problems.append(f"{where}: {left} left in the content {content!r}")
            if not content.strip():
                problems.append(f"{where}: no content read from {''.join(texts)!r}")
    return problems, answers


def check_readme_example() -> list[str]:
    """The README's live section run as written (tests/test_readme.py's runner)."""
    from tests import test_readme

    text, first_line = test_readme.section(
        test_readme.README.read_text(encoding="utf-8"), README_SECTION
    )
    with tempfile.TemporaryDirectory(prefix="chatfmt-live-readme-") as folder:
        workspace = Path(folder)
        for name in (*test_readme.LINKED_INTO_WORKSPACE, "tests", "compiler"):
            (workspace / name).symlink_to(ROOT / name, target_is_directory=True)
        problems = test_readme.run_quick_start(
            text, first_line, workspace, timeout=1800
        )
    return [f"README example: {line}" for line in problems]
