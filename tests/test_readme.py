"""The README's quick start runs as written, and every relative link in the README and
docs/ leads somewhere (issue 28).

The quick start's fenced blocks are read from README.md itself, so editing the README
changes what runs. They run in order in a folder standing in for the repository's root
(`templates`, `specs` and `generated` linked into it, so what the blocks write stays out
of the checkout), with `chatfmt` on PATH as the virtualenv puts it:

- a ``python`` block runs in a fresh interpreter; where a ``text`` block follows it, that
  is what it must print;
- a ``console`` block is ``$ command`` lines, each followed by what it must print;
- a ``sh`` block's commands must succeed, and each ``-o FILE`` must be written. The
  commands that start a server (``vllm serve``, ``python PLUGIN serve``) are not run:
  each must be the command the plugin file written before it prints in its docstring,
  with the model and the file's name filled in.
"""

from __future__ import annotations

import ast
import os
import re
import shlex
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
QUICK_START = "## Quick start"
LINKED_INTO_WORKSPACE = ("templates", "specs", "generated")
BIN = Path(sys.executable).parent


@dataclass(frozen=True)
class Block:
    lang: str
    text: str
    line: int  # of the opening fence, 1-based


def fenced_blocks(markdown: str, first_line: int = 1) -> list[Block]:
    blocks, lang, start, body = [], None, 0, []
    for number, line in enumerate(markdown.splitlines(), first_line):
        if lang is None and line.startswith("```"):
            lang, start, body = line[3:].strip(), number, []
        elif lang is not None and line.startswith("```"):
            blocks.append(Block(lang, "\n".join(body) + "\n", start))
            lang = None
        elif lang is not None:
            body.append(line)
    return blocks


def section(markdown: str, heading: str) -> tuple[str, int]:
    """The text under a level-2 heading, up to the next one, and its first line number."""
    lines = markdown.splitlines()
    start = lines.index(heading)
    end = next(
        (i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines)
    )
    return "\n".join(lines[start + 1 : end]), start + 2


def commands(script: str) -> list[str]:
    """A shell block's commands, continuation lines joined; comments left to bash."""
    joined = script.replace("\\\n", " ")
    return [line.strip() for line in joined.splitlines() if line.strip()]


def is_server_start(command: str) -> bool:
    words = shlex.split(command, comments=True)
    return words[:2] == ["vllm", "serve"] or (
        len(words) > 2 and words[0] == "python" and words[2] == "serve"
    )


def _run(argv: list[str], cwd: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    env.pop("PYTHONPATH", None)
    return subprocess.run(
        argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
        timeout=timeout, check=False,
    )


def _shell(command: str, cwd: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    return _run(["bash", "-o", "pipefail", "-c", command], cwd, timeout)


def _outputs(command: str) -> list[str]:
    words = shlex.split(command, comments=True)
    return [words[i + 1] for i, word in enumerate(words[:-1]) if word in ("-o", "--output")]


def _serve_command_of(plugin: Path) -> list[str]:
    """The command the plugin's docstring gives under "Serve with", as words."""
    doc = ast.get_docstring(ast.parse(plugin.read_text(encoding="utf-8"))) or ""
    lines = doc.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Serve with"))
    command = []
    for line in lines[start + 1 :]:
        if command and not line.startswith("    "):
            break
        if line.strip():
            command.append(line.strip())
    return shlex.split(" ".join(command).replace("\\ ", " "))


def _as_in_docstring(command: str, plugins: list[str]) -> tuple[list[str], str | None]:
    """The README's server command with its model and plugin file named as the plugin's
    docstring names them, and the plugin file it uses."""
    words = shlex.split(command, comments=True)
    model_at = 2 if words[0] == "vllm" else words.index("--model-path") + 1
    words[model_at] = "MODEL"
    plugin = next((word for word in words if word in plugins), None)
    return ["THIS_FILE" if word == plugin else word for word in words], plugin


def run_quick_start(
    markdown: str, first_line: int, workspace: Path, timeout: int = 300
) -> list[str]:
    """Run the blocks in order; return what went wrong, each naming its README line.
    ``timeout``: seconds for each block or command (the live example loads a model)."""
    problems: list[str] = []
    blocks = fenced_blocks(markdown, first_line)
    plugins: list[str] = []
    for index, block in enumerate(blocks):
        where = f"README.md:{block.line}"
        if block.lang == "python":
            done = _run([sys.executable, "-c", block.text], workspace, timeout)
            if done.returncode != 0:
                problems.append(f"{where}: the block fails:\n{done.stderr}")
                continue
            after = blocks[index + 1] if index + 1 < len(blocks) else None
            if after is not None and after.lang == "text" and done.stdout != after.text:
                problems.append(
                    f"{where}: prints\n{done.stdout}which is not what README.md:"
                    f"{after.line} shows:\n{after.text}"
                )
        elif block.lang == "console":
            problems += _run_console(block, workspace, timeout)
        elif block.lang == "sh":
            for command in commands(block.text):
                if is_server_start(command):
                    problems += _check_server_start(command, plugins, workspace, where)
                    continue
                done = _shell(command, workspace, timeout)
                if done.returncode != 0:
                    problems.append(f"{where}: `{command}` fails:\n{done.stderr}")
                for output in _outputs(command):
                    if not (workspace / output).is_file() or not (workspace / output).stat().st_size:
                        problems.append(f"{where}: `{command}` wrote no {output}")
                    if command.startswith("chatfmt plugin"):
                        plugins.append(output)
        elif block.lang != "text":
            problems.append(f"{where}: a {block.lang!r} block the test does not know how to run")
    return problems


def _run_console(block: Block, workspace: Path, timeout: int = 300) -> list[str]:
    problems, command, shown = [], None, []
    for line in [*block.text.splitlines(), "$ "]:
        if line.startswith("$ "):
            if command:
                done = _shell(command, workspace, timeout)
                printed = done.stdout.rstrip("\n").splitlines()
                if done.returncode != 0 or printed != shown:
                    problems.append(
                        f"README.md:{block.line}: `{command}` printed\n{done.stdout}{done.stderr}"
                        f"(exit {done.returncode}), not what the README shows:\n"
                        + "\n".join(shown)
                    )
            command, shown = line[2:].strip(), []
        else:
            shown.append(line)
    return problems


def _check_server_start(
    command: str, plugins: list[str], workspace: Path, where: str
) -> list[str]:
    words, plugin = _as_in_docstring(command, plugins)
    if plugin is None:
        return [f"{where}: `{command}` names no plugin file the block wrote before it"]
    expected = _serve_command_of(workspace / plugin)
    if words != expected:
        return [f"{where}: `{command}` is not the plugin's own command {expected}"]
    return []


@pytest.fixture
def workspace(tmp_path):
    for name in LINKED_INTO_WORKSPACE:
        (tmp_path / name).symlink_to(ROOT / name, target_is_directory=True)
    return tmp_path


def _quick_start() -> tuple[str, int]:
    return section(README.read_text(encoding="utf-8"), QUICK_START)


def test_the_quick_start_runs_as_written(workspace):
    if not (BIN / "chatfmt").exists():
        pytest.skip(f"the chatfmt command is not installed in {BIN}")
    text, first_line = _quick_start()
    assert run_quick_start(text, first_line, workspace) == []


def test_the_quick_start_shows_output_and_serves_both_servers():
    """What the run above checks is there to check: shown output, and each server."""
    text, first_line = _quick_start()
    blocks = fenced_blocks(text, first_line)
    assert sum(block.lang == "text" for block in blocks) >= 3
    assert any(block.lang == "console" for block in blocks)
    serve = [c for b in blocks if b.lang == "sh" for c in commands(b.text) if is_server_start(c)]
    assert any(c.startswith("vllm serve") for c in serve)
    assert any(c.startswith("python ") for c in serve)
    plugin_lines = [c for b in blocks if b.lang == "sh" for c in commands(b.text)]
    assert any("plugin vllm --auto" in c for c in plugin_lines)
    assert any("plugin sglang --auto" in c for c in plugin_lines)


def test_a_broken_block_is_reported(workspace):
    markdown = textwrap.dedent(
        """\
        ```python
        print(6 * 7)
        ```

        ```text
        43
        ```

        ```console
        $ echo 42
        43
        ```

        ```sh
        chatfmt plugin vllm specs/qwen_qwen3_0_6b.yaml -o p.py
        vllm serve M --tool-parser-plugin p.py --tool-call-parser other_name
        chatfmt export gbnf specs/no_such_spec.yaml -o g.gbnf
        ```
        """
    )
    problems = run_quick_start(markdown, 1, workspace)
    assert [problem.split(":", 2)[1] for problem in problems] == ["1", "9", "14", "14", "14"]
    assert "prints\n42\n" in problems[0]
    assert "plugin's own command" in problems[2]
    assert "fails" in problems[3] and "wrote no g.gbnf" in problems[4]


# --- links --------------------------------------------------------------------------------

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
CODE_SPAN = re.compile(r"`+[^`]*`+")


def _prose_lines(markdown: str) -> list[str]:
    """Lines outside fenced blocks, code spans removed."""
    lines, fenced = [], False
    for line in markdown.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced:
            lines.append(CODE_SPAN.sub("", line))
    return lines


def anchors(markdown: str) -> set[str]:
    """GitHub's anchors for a file's headings: lower case, punctuation dropped, spaces
    as hyphens, a repeated heading numbered."""
    seen: dict[str, int] = {}
    found = set()
    fenced = False
    for line in markdown.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        if fenced or not re.match(r"#{1,6} ", line):
            continue
        slug = re.sub(r"[^\w\- ]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def broken_links(page: Path) -> list[str]:
    problems = []
    for line in _prose_lines(page.read_text(encoding="utf-8")):
        for target in LINK.findall(line):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            if not linked.exists():
                problems.append(f"{page.name}: {target}: no such file")
            elif anchor and anchor not in anchors(linked.read_text(encoding="utf-8")):
                problems.append(f"{page.name}: {target}: no such heading in {linked.name}")
    return problems


PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_every_relative_link_resolves(page):
    assert broken_links(page) == []


def test_a_broken_link_is_reported(tmp_path):
    (tmp_path / "other.md").write_text("# A heading: `with code`\n", encoding="utf-8")
    page = tmp_path / "page.md"
    page.write_text(
        "[fine](other.md#a-heading-with-code), [gone](missing.md), [no anchor](other.md#b), "
        "[web](https://example.com), `[in code](nowhere.md)`\n",
        encoding="utf-8",
    )
    assert broken_links(page) == [
        "page.md: missing.md: no such file",
        "page.md: other.md#b: no such heading in other.md",
    ]


def test_the_front_page_stays_a_front_page():
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 300
