"""The build: every template source → its spec (analysis + reviewed overrides) → its
generated parser module and grammar files. Files are rewritten only when their bytes
change, so a second build touches nothing.

A template that fails (it does not compile or render within its limits, its overrides
are wrong, …) is reported by name and its files are left as they were; the others are
still built, and the report lists every failure."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from . import __version__, spec as specs
from .analyze import analyze, leaked_probe_strings
from . import model
from .codegen import module as module_codegen
from .render import DEFAULT_TIME_BUDGET, ChatTemplate, RenderError, RenderInputs
from .sources import TemplateSource

PACKAGE_INIT = '"""Generated chat-format parsers: one standalone module per template."""\n'


class BuildError(Exception):
    pass


@dataclass
class BuildReport:
    templates: int = 0
    changed: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # One line per template that failed, naming it (its file, and line where known).
    failures: list[str] = field(default_factory=list)


def spec_for(
    source: TemplateSource,
    overrides: list,
    origin: str,
    *,
    time_budget: float | None = DEFAULT_TIME_BUDGET,
) -> tuple[dict, list[str]]:
    """The resolved spec of one template: analysis, then the reviewed overrides.
    ``time_budget``: seconds for all the template's renders together."""
    inputs = RenderInputs(source.bos_token, source.eos_token, dict(source.variables))
    template = ChatTemplate(source.source, source.path, inputs, time_budget=time_budget)
    analysis = analyze(template, source.tool_shape)
    leaks = leaked_probe_strings(analysis.body)
    if leaks:
        raise BuildError(f"{source.path}: probe values leaked into the spec: {leaks}")
    body, notes = specs.apply_overrides(analysis.body, overrides, origin)
    spec = {
        "spec_version": 1,
        "compiler_version": __version__,
        "template": {"path": source.path, "sha256": source.sha256},
        "render_inputs": {
            "bos_token": source.bos_token,
            "eos_token": source.eos_token,
            "variables": dict(source.variables),
            "tool_shape": source.tool_shape,
        },
        **body,
        "review": analysis.review,
        "overrides": overrides,
    }
    specs.validate(spec, origin)
    warnings = list(notes) + [f"{origin}: review {n['path']}: {n['message']}" for n in analysis.review]
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


def outputs(slug: str, spec: dict, origin: str | None = None) -> dict[str, str | None]:
    """File name → contents of everything generated for one spec (``origin``: the
    spec file, named in errors)."""
    fmt = model.build(spec, slug=slug, origin=origin or f"{slug}.yaml")
    return module_codegen.generate(fmt).files(slug)


def build(
    sources: list[TemplateSource],
    specs_dir: str,
    generated_dir: str,
    *,
    log=print,
    time_budget: float | None = DEFAULT_TIME_BUDGET,
    keep_going: bool = True,
) -> BuildReport:
    """Build every source; ``time_budget``: seconds for all the renders of one template.
    A template that fails is listed in the report's ``failures`` and the build goes on
    (``keep_going=False``: its error is raised instead, as it was)."""
    report = BuildReport(templates=len(sources))
    os.makedirs(specs_dir, exist_ok=True)
    os.makedirs(generated_dir, exist_ok=True)
    for number, source in enumerate(sources, 1):
        spec_path = os.path.join(specs_dir, f"{source.slug}.yaml")
        try:
            overrides = specs.read_overrides(spec_path)
            spec, warnings = spec_for(source, overrides, spec_path, time_budget=time_budget)
            files: dict[str, str | None] = {spec_path: specs.dump(spec)}
            for name, text in outputs(source.slug, spec, spec_path).items():
                files[os.path.join(generated_dir, name)] = text
        except Exception as error:
            if not keep_going:
                raise
            report.failures.append(failure(source, spec_path, error))
            log(f"[{number}/{len(sources)}] {source.slug}: failed")
            continue
        report.warnings.extend(source.warnings)
        report.warnings.extend(warnings)
        for path, text in files.items():
            _write_if_changed(path, text, report)
        log(f"[{number}/{len(sources)}] {source.slug}")
    _write_if_changed(os.path.join(generated_dir, "__init__.py"), PACKAGE_INIT, report)
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
