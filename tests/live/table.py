"""The live run's table (Markdown, with a JSON copy beside it) and its summary line.

The table is an artifact of the run (``make test-live`` writes it to
``.cache/live/table.md``), not a committed page: docs/live-model.md keeps a summary
that is updated on purpose.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Classes of failure, in the order a row reports them (the first found is the row's
# cause): the build's, the grammar's, an export's, the parser's, the stream's, the
# plugin's, then the model's own.
CAUSES = {
    "missing-export": "the module has no such export (MISSING_EXPORTS)",
    "refused": "a grammar refuses a consumer (does not compile) or the prefilled trigger",
    "dead-end": "the grammar allows no token, or only end-of-sequence while not accepting",
    "schema": "the grammar admitted a call its schema or tools refuse",
    "stopped": "the grammar admitted an end-of-turn string (STOP) inside the call",
    "parse": "the grammar accepted an output parse does not read as one call",
    "marker": "a marker left in the content",
    "export": "another export refuses a token the decoding grammar took, or ends otherwise",
    "stream": "StreamParser fed the token pieces differs from parse",
    "vllm": "the vLLM plugin's reading differs from parse",
    "token-cap": "the model's own failure: the call not finished within the token cap",
    "error": "the harness failed (a bug here, not in the format)",
}


@dataclass
class Row:
    slug: str
    setting: str  # which decode: "default", or the full matrix's export/choice
    cause: str | None = None  # None: passed
    detail: str = ""
    notes: list[str] = field(default_factory=list)  # every failure found
    tokens: int = 0  # tokens the model chose
    seconds: float = 0.0
    fallback: bool = (
        False  # the format reads our fallback calls (its template has none)
    )
    call: str = ""  # the call read, name(arguments)
    output: str = ""  # the output's text, the prefill included

    def fail(self, cause: str, detail: str) -> None:
        assert cause in CAUSES, cause
        self.notes.append(f"{cause}: {detail}")
        if self.cause is None or list(CAUSES).index(cause) < list(CAUSES).index(
            self.cause
        ):
            self.cause, self.detail = cause, detail


def _commit() -> str:
    try:
        found = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,  # a hang guard only
            check=False,
        )
    except OSError:
        return "unknown"
    return found.stdout.strip() or "unknown"


def _cell(text: str, limit: int = 160) -> str:
    text = text if len(text) <= limit else text[: limit - 3] + "..."
    return text.replace("|", "\\|").replace("\n", "\\n")


def failing_formats(rows: list[Row]) -> dict[str, Row]:
    """The first failing row of each format that has one."""
    found: dict[str, Row] = {}
    for row in rows:
        if row.cause is not None and row.slug not in found:
            found[row.slug] = row
    return found


def write(
    path: Path,
    rows: list[Row],
    own: list[str],
    answers: list[str],
    loaded,
    args,
    minutes: float,
) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    formats = sorted({row.slug for row in rows})
    failing = failing_formats(rows)
    lines = [
        "# Live run: SmolLM2-135M-Instruct under the corpus formats' grammars",
        "",
        f"Commit {_commit()}, {time.strftime('%Y-%m-%d %H:%M')}; {minutes:.1f} min in all"
        f" (model loaded in {loaded.seconds:.0f} s); token cap {args.cap};"
        f" frequency penalty {getattr(args, 'frequency_penalty', 0.0)},"
        f" presence penalty {getattr(args, 'presence_penalty', 0.0)};"
        f" {'full matrix' if args.full else 'default run'};"
        f" vLLM path {'off' if args.no_vllm else 'on'}.",
        "",
        f"{len(formats)} formats, {len(formats) - len(failing)} pass;"
        f" {len(rows)} decodes, {sum(row.cause is None for row in rows)} pass.",
        "",
        "The model's own template and the README example: "
        + ("pass." if not own else "; ".join(own)),
        "",
        *(["The model's answers under its own template:", ""] if answers else []),
        *[f"- {_cell(answer, 400)}" for answer in answers],
        *([""] if answers else []),
        "| format | decode | result | tokens | seconds | the call read, or the cause |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        name = row.slug + (" (fallback calls)" if row.fallback else "")
        result = "pass" if row.cause is None else row.cause
        said = row.call if row.cause is None else f"{row.detail}"
        lines.append(
            f"| {name} | {row.setting} | {result} | {row.tokens} | {row.seconds:.1f} |"
            f" {_cell(said)} |"
        )
    by_cause: dict[str, list[str]] = defaultdict(list)
    for row in rows:
        if row.cause is not None:
            by_cause[row.cause].append(f"{row.slug} ({row.setting})")
    if by_cause:
        lines += ["", "## By cause", ""]
        for cause in CAUSES:
            if cause in by_cause:
                lines.append(
                    f"- **{cause}** ({CAUSES[cause]}): {', '.join(by_cause[cause])}"
                )
        lines += ["", "## Every failure found", ""]
        for row in rows:
            if row.cause is not None:
                lines.append(f"### {row.slug} ({row.setting})")
                lines += [
                    "",
                    "```",
                    *row.notes,
                    "",
                    "the output:",
                    row.output,
                    "```",
                    "",
                ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    data = {
        "commit": _commit(),
        "minutes": round(minutes, 2),
        "cap": args.cap,
        "frequency_penalty": getattr(args, "frequency_penalty", 0.0),
        "presence_penalty": getattr(args, "presence_penalty", 0.0),
        "full": bool(args.full),
        "own": own,
        "answers": answers,
        "rows": [
            {
                "slug": row.slug,
                "setting": row.setting,
                "cause": row.cause,
                "detail": row.detail,
                "notes": row.notes,
                "tokens": row.tokens,
                "seconds": round(row.seconds, 2),
                "fallback": row.fallback,
                "call": row.call,
                "output": row.output,
            }
            for row in rows
        ],
    }
    path.with_suffix(".json").write_text(
        json.dumps(data, indent=1) + "\n", encoding="utf-8"
    )


def summary(
    rows: list[Row], own: list[str], allowed: float, minutes: float
) -> tuple[bool, str]:
    """(whether the run passes, its one line)."""
    formats = sorted({row.slug for row in rows})
    failing = failing_formats(rows)
    counts: dict[str, int] = defaultdict(int)
    for row in failing.values():
        counts[row.cause or ""] += 1
    limit = int(allowed * len(formats))
    ok = not own and len(failing) <= limit
    causes = ", ".join(
        f"{cause} {counts[cause]}" for cause in CAUSES if counts.get(cause)
    )
    line = (
        f"{'PASS' if ok else 'FAIL'}: {len(formats) - len(failing)}/{len(formats)} formats pass"
        f" ({len(failing)} failing, at most {limit} allowed{': ' + causes if causes else ''});"
        f" own template and README example {'pass' if not own else 'FAIL'};"
        f" {minutes:.1f} min"
    )
    return ok, line
