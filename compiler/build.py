"""The build: every template source → its spec (analysis + reviewed overrides) → its
generated parser module and grammar files. Files are rewritten only when their bytes
change, so a second build touches nothing.

A template that fails (it does not compile or render within its limits, its overrides
are wrong, …) is reported by name and its files are left as they were; the others are
still built, and the report lists every failure.

A template that fails with the inputs its source gives, or renders the conversation
without the user's message, is analysed again with the inputs some templates need and
Hugging Face's callers often pass (``render_variants``): the tokenizer's other special
tokens, message content as a list of text parts. The spec records the inputs used
(``render_inputs``) and the build log says why."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
import os
from collections.abc import Iterator
from dataclasses import dataclass, field

from . import __version__, samples, spec as specs, tokens
from .analyze import Analysis, analyze
from . import model, polyfills
from .codegen import module as module_codegen, response_template, runtime_module
from .conversation import Conversation
from .render import (
    DEFAULT_TIME_BUDGET,
    PLACEHOLDERS,
    ChatTemplate,
    RenderError,
    RenderInputs,
    RenderLimitExceeded,
    placeholder,
)
from .sources import TemplateSource
from .tokens import SPECIAL_TOKENS

PACKAGE_INIT = (
    '"""Generated chat-format parsers: one format module per template, all running on\n'
    'one runtime (_runtime.py)."""\n'
)


def package_files() -> dict[str, str]:
    """File name → contents of what every generated folder holds besides its format
    modules: the package's __init__.py and the one runtime."""
    return {"__init__.py": PACKAGE_INIT, "_runtime.py": runtime_module.shared()}


class BuildError(Exception):
    pass


@dataclass
class BuildReport:
    templates: int = 0
    changed: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # One line per template that failed, naming it (its file, and line where known).
    failures: list[str] = field(default_factory=list)
    # One line per template analysed with inputs its source does not give, and why.
    notes: list[str] = field(default_factory=list)


# --------------------------------------------------------------------------- render inputs


@dataclass(frozen=True)
class Variant:
    """Render inputs to analyse a template with, and what they add to the source's."""

    inputs: RenderInputs
    adds: tuple[str, ...] = ()  # one phrase per input added; () for the source's own

    def describe(self) -> str:
        return " and ".join(self.adds) if self.adds else "the inputs its source gives"


def render_variants(source: TemplateSource, template: ChatTemplate) -> list[Variant]:
    """The render inputs to analyse ``template`` with, in the order to try them: the
    source's own (its special tokens where the template reads them, as Hugging Face
    passes them); then placeholders for special tokens the template reads and the source
    does not give; then each of those with message content as a list of text parts."""
    read = set(template.undeclared_variables())
    given = {
        name: source.special_tokens[name]
        for name in SPECIAL_TOKENS
        if name in read and name in source.special_tokens
    }
    missing = [name for name in SPECIAL_TOKENS if name in read and name not in given]
    own = RenderInputs(source.bos_token, source.eos_token, dict(source.variables), given)
    variants = [Variant(own)]
    if missing:
        tokens = {name: given.get(name) for name in SPECIAL_TOKENS if name in read}
        names = ", ".join(missing)
        them = "it" if len(missing) == 1 else "them"
        variants.append(
            Variant(
                dataclasses.replace(own, special_tokens=tokens),
                (f"a placeholder for the tokenizer's {names} (the source does not give {them})",),
            )
        )
    for variant in list(variants):
        variants.append(
            Variant(
                dataclasses.replace(variant.inputs, content_as_parts=True),
                (*variant.adds, "message content as a list of text parts"),
            )
        )
    return variants


@dataclass
class Analyzed:
    analysis: Analysis
    inputs: RenderInputs
    # Why the source's own inputs would not do, where other inputs were used.
    note: str | None = None
    # What the build should warn of: the template renders no user text.
    warning: str | None = None


def analyze_source(
    source: TemplateSource, *, time_budget: float | None = DEFAULT_TIME_BUDGET
) -> Analyzed:
    """The analysis of one template, with the first of ``render_variants`` that renders
    the conversation (the user's message shows) and that the analysis gets through.

    Where none does, the error is the one the source's own inputs give (its file and
    line), naming the inputs also tried: a template that renders and never shows the
    user's message (prose, say) is no chat template, unless it shows an assistant's
    answer (an ASR or reranker template): that one is built, with a warning. A limit
    (time, size, memory) stops at once. ``time_budget``: seconds for all the template's
    renders, every variant's together.
    """
    if not source.source.strip():
        raise BuildError(f"{source.path}: the template is empty: there is nothing to analyse")
    template = ChatTemplate(source.source, source.path, time_budget=time_budget)
    variants = render_variants(source, template)
    problems: list[str | RenderError] = []
    userless: list[Variant] = []  # they render an assistant turn, and no user text
    for variant in variants:
        template.inputs = variant.inputs
        problem = _misread(template, source.tool_shape, variant.inputs)
        if problem == _NO_USER_TEXT and _renders_assistant(template, source.tool_shape):
            userless.append(variant)
        if problem is None:
            analyzed = _analysed(template, source, variant, variants, problems)
            if isinstance(analyzed, Analyzed):
                return analyzed
            problem = analyzed
        problems.append(problem)
    # Only where no inputs show the user's text: an ASR or reranker template writes the
    # user's turn otherwise (audio, a fixed instruction), yet its assistant turns are all
    # a parser reads.
    for variant in userless:
        template.inputs = variant.inputs
        analyzed = _analysed(template, source, variant, variants, problems)
        if isinstance(analyzed, Analyzed):
            analyzed.warning = (
                f"{source.path}: renders no user text (the user's message never shows in "
                "its prompt), but renders the assistant's turn, which is what a parser "
                "reads: built from that; check it is a chat template"
            )
            return analyzed
    first = problems[0]
    tried = "; ".join(
        f"with {variant.describe()} it {_why(problem, source.path)}"
        for variant, problem in zip(variants[1:], problems[1:], strict=True)
    )
    also = f" (also tried: {tried})" if tried else ""
    if isinstance(first, str):
        raise BuildError(f"{source.path}: not a chat template: it {first}{also}")
    raise type(first)(first.path, first.line, first.message + also)


def _analysed(
    template: ChatTemplate,
    source: TemplateSource,
    variant: Variant,
    variants: list[Variant],
    problems: list[str | RenderError],
) -> Analyzed | RenderError:
    """The analysis with ``variant``'s inputs (set on ``template``), or why it failed;
    where it is not the first variant, a note says why the first would not do."""
    try:
        analysis = analyze(template, source.tool_shape)
    except RenderLimitExceeded:
        raise
    except RenderError as error:
        return error
    note = None
    if variant is not variants[0]:
        note = (
            f"{source.path}: analysed with {variant.describe()}: with "
            f"{variants[0].describe()} it {_why(problems[0], source.path)}"
        )
    return Analyzed(analysis, variant.inputs, note)


_NO_USER_TEXT = "renders the conversation without the user's message"


def _renders_assistant(template: ChatTemplate, tool_shape: str) -> bool:
    """Whether an assistant's answer after the plain history shows in a render."""
    talk = Conversation(template, tool_shape)
    for system in (True, False):
        talk.system_role = system
        full = talk.attempt(talk.full, {"role": "assistant", "content": samples.CONTENT})
        if full is not None and samples.CONTENT in full:
            return True
    return False


def _misread(
    template: ChatTemplate, tool_shape: str, inputs: RenderInputs
) -> str | RenderError | None:
    """What is wrong with the inputs, seen in a plain prompt (system and user, or the
    user alone): the error every such render raises, or that none shows the user's
    message (or shows it as the parts we passed, printed); None when one shows it."""
    talk = Conversation(template, tool_shape)
    renders, error = [], None
    for system in (True, False):
        talk.system_role = system
        try:
            renders.append(talk.prompt())
        except RenderLimitExceeded:
            raise
        except RenderError as failed:
            error = error or failed
    if not renders:
        return error
    printed = (f"'text': {samples.USER!r}", f'"text": "{samples.USER}"')
    for text in renders:
        if samples.USER in text and not (
            inputs.content_as_parts and any(form in text for form in printed)
        ):
            return None
    if inputs.content_as_parts and any(samples.USER in text for text in renders):
        return "prints the parts of the user's message instead of their text"
    return _NO_USER_TEXT


def _why(problem: str | RenderError, path: str) -> str:
    if isinstance(problem, str):
        return problem
    where = f"line {problem.line}" if problem.line else path
    return f"fails ({where}: {problem.message})"


# --------------------------------------------------------------------------- spec


# A placeholder → the special token it stands in for.
_PLACEHOLDER_OF = {placeholder(name): name for name in ("bos_token", "eos_token", *SPECIAL_TOKENS)}


def probe_leaks(spec: dict) -> list[str]:
    """Each value of the spec's format (not its metadata, review notes or overrides'
    reasons) that holds a value the analysis invented, or a special token's placeholder,
    one line each, naming the field: ``content.start holds the probe value 'Sysprobe'``."""
    leaks = []
    for key, value in spec.items():
        if key in (*specs.METADATA, "overrides"):
            continue
        for path, text in _texts(value, key):
            found = samples.probe_in(text)
            if found is not None:
                leaks.append(
                    f"{path} holds the probe value {found[1]!r} (the analysis took text "
                    "it gave the template for part of the format)"
                )
                continue
            for stand_in in PLACEHOLDERS:
                if stand_in in text:
                    name = _PLACEHOLDER_OF[stand_in]
                    leaks.append(
                        f"{path} holds the placeholder for the tokenizer's {name}, which "
                        f"the source does not give (give it: {name} in the model's "
                        "tokenizer_config.json, or in the manifest entry's inputs)"
                    )
                    break
    return leaks


def _texts(value, path: str):
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _texts(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _texts(item, f"{path}.{index}")
    elif isinstance(value, str):
        yield path, value


def spec_for(
    source: TemplateSource,
    overrides: list,
    origin: str,
    *,
    time_budget: float | None = DEFAULT_TIME_BUDGET,
    notes: list[str] | None = None,
    template_path: str | None = None,
) -> tuple[dict, list[str]]:
    """The resolved spec of one template: analysis, then the reviewed overrides.
    ``time_budget``: seconds for all the template's renders together; ``notes``: gets
    a line where the analysis used inputs the source does not give, saying why;
    ``template_path``: the template's path as the spec records it (default: as given)."""
    analyzed = analyze_source(source, time_budget=time_budget)
    if analyzed.note and notes is not None:
        notes.append(analyzed.note)
    analysis = analyzed.analysis
    # What prepare_messages rewrites follows from the analysis and the inputs the
    # template needed; overrides may correct it like any other part.
    body = {
        **analysis.body,
        "polyfills": polyfills.decide(analysis.body, analyzed.inputs.content_as_parts),
    }
    body, override_notes = specs.apply_overrides(body, overrides, origin)
    spec = {
        "spec_version": 1,
        "compiler_version": __version__,
        "template": {
            "path": source.path if template_path is None else template_path,
            "sha256": source.sha256,
        },
        "render_inputs": analyzed.inputs.as_spec(source.tool_shape),
        **body,
        # Only where the source has a tokenizer: a corpus template's spec has none.
        **({"tokens": tokens.section(source.tokenizer, body)} if source.tokenizer else {}),
        "review": analysis.review,
        "overrides": overrides,
    }
    leaks = probe_leaks(spec)
    if leaks:
        raise BuildError(
            f"{source.path}: the spec would hold text the template does not write: "
            f"{'; '.join(leaks)}; an override in {origin} can correct a field"
        )
    specs.validate(spec, origin)
    # What an export cannot say of the format (a note for the reader of the spec; the
    # build does not warn of it).
    exports = response_template.review_notes(model.build(spec, slug=source.slug, origin=origin))
    spec["review"] = [*analysis.review, *exports]
    warnings = list(override_notes) + [
        f"{origin}: review {n['path']}: {n['message']}" for n in analysis.review
    ]
    if analyzed.warning:
        warnings.append(analyzed.warning)
    return spec, warnings


def _write_if_changed(path: str, text: str | None, report: BuildReport) -> None:
    if text is None:
        if os.path.exists(path):
            os.remove(path)
            report.changed.append(path)
        return
    data = text.encode("utf-8")
    if os.path.exists(path):
        with open(path, "rb") as handle:
            if handle.read() == data:
                return
    with open(path, "wb") as handle:
        handle.write(data)
    report.changed.append(path)


def generate(slug: str, spec: dict, origin: str | None = None) -> module_codegen.Generated:
    """Everything generated for one spec (``origin``: the spec file, named in errors)."""
    fmt = model.build(spec, slug=slug, origin=origin or f"{slug}.yaml")
    return module_codegen.generate(fmt)


def outputs(slug: str, spec: dict, origin: str | None = None) -> dict[str, str | None]:
    """File name → contents of everything generated for one spec."""
    return generate(slug, spec, origin).files(slug)


def missing_exports(generated: module_codegen.Generated, spec_path: str) -> list[str]:
    """One warning per export that could not be made for a spec."""
    return [
        f"{spec_path}: no {export} export: {why} (the module is written without it; "
        f"its functions raise ValueError)"
        for export, why in generated.missing.items()
    ]


@dataclass
class _Built:
    """One template's outcome: the files to write (path → text, None: remove), its
    warnings and notes; or the line that says why it failed."""

    files: dict[str, str | None] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    failure: str | None = None


def _build_one(
    source: TemplateSource,
    specs_dir: str,
    generated_dir: str,
    time_budget: float | None,
    keep_going: bool,
) -> _Built:
    spec_path = os.path.join(specs_dir, f"{source.slug}.yaml")
    try:
        overrides = specs.read_overrides(spec_path)
        notes: list[str] = []
        spec, warnings = spec_for(
            source,
            overrides,
            spec_path,
            time_budget=time_budget,
            notes=notes,
            template_path=specs.recorded_template_path(source.path, spec_path),
        )
        files: dict[str, str | None] = {spec_path: specs.dump(spec)}
        made = generate(source.slug, spec, spec_path)
        for name, text in made.files(source.slug).items():
            files[os.path.join(generated_dir, name)] = text
        warnings.extend(missing_exports(made, spec_path))
    except Exception as error:
        if not keep_going:
            raise
        return _Built(failure=failure(source, spec_path, error))
    return _Built(files, warnings, notes)


def _outcomes(sources: list[TemplateSource], jobs: int, *arguments) -> Iterator[_Built]:
    """Each source's outcome, in their order; with ``jobs`` > 1, made by that many
    worker processes (each template is analysed and generated on its own, and the
    sandbox's limits are per process)."""
    if jobs <= 1 or len(sources) < 2:
        for source in sources:
            yield _build_one(source, *arguments)
        return
    with concurrent.futures.ProcessPoolExecutor(max_workers=min(jobs, len(sources))) as pool:
        yield from pool.map(functools.partial(_outcome_of, arguments), sources)


def _outcome_of(arguments: tuple, source: TemplateSource) -> _Built:
    return _build_one(source, *arguments)


def build(
    sources: list[TemplateSource],
    specs_dir: str,
    generated_dir: str,
    *,
    log=print,
    time_budget: float | None = DEFAULT_TIME_BUDGET,
    keep_going: bool = True,
    jobs: int = 1,
) -> BuildReport:
    """Build every source; ``time_budget``: seconds for all the renders of one template.
    A template that fails is listed in the report's ``failures`` and the build goes on
    (``keep_going=False``: its error is raised instead, as it was). ``jobs``: how many
    templates are built at once, each in a process of its own (the files written and
    the log are the same, in the same order)."""
    report = BuildReport(templates=len(sources))
    for folder in (specs_dir, generated_dir):
        try:
            os.makedirs(folder, exist_ok=True)
        except OSError as error:  # a file of that name, no permission
            raise BuildError(
                f"cannot make the folder {folder}: {error.strerror or error}"
            ) from None
    arguments = (specs_dir, generated_dir, time_budget, keep_going)
    jobs = jobs if keep_going else 1  # an error to raise is raised where it happens
    outcomes = _outcomes(sources, jobs, *arguments)
    for number, (source, built) in enumerate(zip(sources, outcomes, strict=True), 1):
        if built.failure is not None:
            report.failures.append(built.failure)
            log(f"[{number}/{len(sources)}] {source.slug}: failed")
            continue
        report.warnings.extend(built.warnings)
        report.notes.extend(built.notes)
        for path, text in built.files.items():
            _write_if_changed(path, text, report)
        log(f"[{number}/{len(sources)}] {source.slug}")
        for note in built.notes:
            log(f"  {note}")
    for name, text in package_files().items():
        _write_if_changed(os.path.join(generated_dir, name), text, report)
    return report


# Errors that say what is wrong with a template or its spec; anything else is a bug.
_INPUT_ERRORS = (RenderError, BuildError, specs.SpecError)


def failure(source: TemplateSource, spec_path: str, error: Exception) -> str:
    """One line for a template that failed, naming its file (the error's own words
    where they name it or its spec already)."""
    if isinstance(error, _INPUT_ERRORS):
        message = str(error)
    else:
        message = f"{type(error).__name__}: {error} (a compiler bug? --debug shows where)"
    if message.startswith((source.path, spec_path)):
        return message
    return f"{source.path}: {message}"
