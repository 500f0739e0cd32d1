"""``python -m tests.live``: the live run (``make test-live``; docs/live-model.md).

    python -m tests.live [--table FILE] [--formats SLUG ...] [--full] [--cap N]
                         [--no-vllm] [--skip-own] [--skip-readme]

Runs, in order: the model's own template (tests/live/own.py), the README's live
example, and one decode per corpus format with tool calls (tests/live/corpus.py;
``--full`` adds the full matrix: every export decoded separately under tool_choice
"required" and a named function, and "auto" with the lazy trigger). Writes the table
to FILE, prints one line of summary, and exits 1 when a check fails: any failure of
the model's own template or the README example, any corpus failure that is not the
model's (token cap), or more than ``ALLOWED`` of the formats with any failure.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from tests.live import model

# The share of corpus formats that may fail (each with its cause in the table).
ALLOWED = 0.05
# New tokens per decode, and the penalties on the output's repeated tokens (OpenAI's
# frequency_penalty and presence_penalty, as a server applies them): a 135M model
# held to a foreign format repeats itself (an array of one string, a run of digits,
# blank lines after the call) until the cap; greedy all the same (docs/live-model.md).
# 320 and not 192: a format whose every marker is several tokens (Hunyuan's
# ``<arg_key:opensource>``, DeepSeek's DSML) writes the tools' six arguments in about
# 300 tokens without a loop (session 11: Hunyuan closed its call at 292).
CAP = 320
FREQUENCY_PENALTY = 0.0
PRESENCE_PENALTY = 0.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.live")
    parser.add_argument("--table", type=Path, default=model.CACHE / "table.md")
    parser.add_argument(
        "--formats", nargs="+", metavar="SLUG", help="these corpus formats only"
    )
    parser.add_argument("--full", action="store_true", help="the full matrix too")
    parser.add_argument("--cap", type=int, default=CAP, help="new tokens per decode")
    parser.add_argument(
        "--frequency-penalty",
        type=float,
        default=FREQUENCY_PENALTY,
        help="OpenAI's frequency_penalty on the output's tokens",
    )
    parser.add_argument(
        "--presence-penalty",
        type=float,
        default=PRESENCE_PENALTY,
        help="OpenAI's presence_penalty on the output's tokens",
    )
    parser.add_argument("--threads", type=int, default=1, help="torch's CPU threads")
    parser.add_argument(
        "--no-vllm", action="store_true", help="skip the vLLM plugin's path"
    )
    parser.add_argument(
        "--skip-own", action="store_true", help="skip the model's own template"
    )
    parser.add_argument(
        "--skip-readme", action="store_true", help="skip the README example"
    )
    args = parser.parse_args(argv)
    model.quiet()
    started = time.monotonic()

    from tqdm import tqdm

    from tests.live import corpus, own, table

    try:
        loaded = model.load(args.threads)
    except model.ModelMissing as error:
        print(f"live: {error}", file=sys.stderr)
        return 2
    how = "from .cache/live" if loaded.cached else "from the GGUF (now cached)"
    print(
        f"live: SmolLM2-135M-Instruct loaded {how} in {loaded.seconds:.0f} s",
        flush=True,
    )

    own_failures: list[str] = []
    answers: list[str] = []
    if not args.skip_own:
        problems, answers = own.check_own_template(loaded)
        own_failures += problems
        for answer in answers:
            print(f"live: own template: {answer}", flush=True)
    if not args.skip_readme:
        own_failures += own.check_readme_example()
    for line in own_failures:
        print(f"live: FAIL {line}", flush=True)

    context = corpus.Context(
        loaded,
        args.cap,
        vllm=not args.no_vllm,
        penalty=(args.frequency_penalty, args.presence_penalty),
    )
    slugs = args.formats or corpus.slugs()
    unknown = sorted(set(slugs) - set(corpus.slugs()))
    if unknown:
        print(
            f"live: not a corpus format with calls: {', '.join(unknown)}",
            file=sys.stderr,
        )
        return 2
    rows = []
    bar = tqdm(slugs, desc="live", unit="format", dynamic_ncols=True, file=sys.stderr)
    for slug in bar:
        bar.set_postfix_str(slug)
        rows.append(corpus.run_format(slug, context))
        if args.full:
            rows += corpus.run_matrix(slug, context)
        failed = sum(row.cause is not None for row in rows)
        bar.set_postfix_str(f"{slug} ({failed} failed)")
        # The table so far, so that a run cut short still leaves one.
        minutes = (time.monotonic() - started) / 60
        table.write(args.table, rows, own_failures, answers, loaded, args, minutes)
    bar.close()

    minutes = (time.monotonic() - started) / 60
    table.write(args.table, rows, own_failures, answers, loaded, args, minutes)
    verdict, summary = table.summary(rows, own_failures, ALLOWED, minutes)
    print(f"live: {summary}; table: {args.table}", flush=True)
    return 0 if verdict else 1


if __name__ == "__main__":
    raise SystemExit(main())
