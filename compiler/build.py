"""The build: every template source → its spec (analysis + reviewed overrides) → its
generated parser module and grammar files. Files are rewritten only when their bytes
change, so a second build touches nothing."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from . import __version__, spec as specs
from .analyze import analyze, leaked_probe_strings
from . import model
from .codegen import module as module_codegen
from .render import ChatTemplate, RenderInputs
from .sources import TemplateSource

PACKAGE_INIT = '"""Generated chat-format parsers: one standalone module per template."""\n'


class BuildError(Exception):
    pass


@dataclass
class BuildReport:
    templates: int = 0
    changed: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def spec_for(source: TemplateSource, overrides: list, origin: str) -> tuple[dict, list[str]]:
    """The resolved spec of one template: analysis, then the reviewed overrides."""
    inputs = RenderInputs(source.bos_token, source.eos_token, dict(source.variables))
    template = ChatTemplate(source.source, source.path, inputs)
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


def build(sources: list[TemplateSource], specs_dir: str, generated_dir: str, *, log=print) -> BuildReport:
    report = BuildReport(templates=len(sources))
    os.makedirs(specs_dir, exist_ok=True)
    os.makedirs(generated_dir, exist_ok=True)
    for number, source in enumerate(sources, 1):
        spec_path = os.path.join(specs_dir, f"{source.slug}.yaml")
        overrides = specs.read_overrides(spec_path)
        spec, warnings = spec_for(source, overrides, spec_path)
        report.warnings.extend(warnings)
        _write_if_changed(spec_path, specs.dump(spec), report)
        for name, text in outputs(source.slug, spec, spec_path).items():
            _write_if_changed(os.path.join(generated_dir, name), text, report)
        log(f"[{number}/{len(sources)}] {source.slug}")
    _write_if_changed(os.path.join(generated_dir, "__init__.py"), PACKAGE_INIT, report)
    return report
