"""Drift: do the committed specs and generated files still match the templates and each
other? Answered without rendering a template, so it is cheap enough for every CI run.

What a rebuild would change, and so is a problem: a template whose bytes or render
inputs differ from those its spec records, a template without a spec or a spec without
its template, a spec the schema rejects or whose overrides are not applied to its body,
and a generated file that is not byte for byte what its spec produces. A spec written
by another compiler version is only a warning: the spec records the version, but the
version alone changes nothing a parser does.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field

from . import __version__, spec as specs, tokens as token_tables
from .build import outputs, package_files
from .sources import TemplateSource, discover

_METADATA = specs.METADATA


@dataclass
class CheckReport:
    problems: list[str] = field(default_factory=list)  # each starts with the file it is about
    warnings: list[str] = field(default_factory=list)


def check(
    specs_dir: str,
    generated_dir: str,
    templates_dir: str | None,
    extra: Iterable[str] = (),
    tokens: dict | None = None,
) -> CheckReport:
    """Every way the specs and generated files have drifted; nothing is rendered.
    Without ``templates_dir`` only the specs and files of the ``extra`` sources are
    checked: the folders may hold those of other templates."""
    report = CheckReport()
    sources = discover(templates_dir, extra, tokens)
    known = {source.slug for source in sources}
    for source in sources:
        spec_path = os.path.join(specs_dir, f"{source.slug}.yaml")
        spec = _spec_of(source, spec_path, report)
        if spec is not None:
            _compare_outputs(source.slug, spec, spec_path, generated_dir, report)
    if templates_dir:
        for spec_path in _files(specs_dir, (".yaml",)):
            slug = os.path.basename(spec_path)[: -len(".yaml")]
            if slug not in known:
                report.problems.append(
                    f"{spec_path}: its template {_template_path(spec_path)} is missing"
                )
        _compare_unclaimed(generated_dir, specs_dir, known, report)
    _compare_package(generated_dir, report)
    return report


def _spec_of(source: TemplateSource, spec_path: str, report: CheckReport) -> dict | None:
    """The spec of ``source`` if it is valid; every way it is stale goes into ``report``."""
    if not os.path.exists(spec_path):
        report.problems.append(f"{spec_path}: missing: {source.path} has no spec yet")
        return None
    try:
        spec = specs.load(spec_path)
        specs.validate(spec, spec_path)
    except specs.SpecLimitError:
        raise  # not drift a rebuild repairs: a file no command reads (exit 2)
    except specs.SpecError as error:
        report.problems.append(str(error))
        return None
    recorded = spec["template"]
    if recorded["sha256"] != source.sha256:
        report.problems.append(
            f"{spec_path}: {source.path} changed since this spec was made "
            f"(sha256 {recorded['sha256'][:12]}… is now {source.sha256[:12]}…)"
        )
    elif recorded["path"] != specs.recorded_template_path(source.path, spec_path):
        # Same bytes under another path: the analysis is the same, only the record moves.
        made_from = specs.template_path_of(recorded["path"], spec_path)
        report.warnings.append(f"{spec_path}: made from {made_from}, found at {source.path}")
    changed = [
        key
        for key, value in _render_inputs(source).items()
        if spec["render_inputs"].get(key) != value
    ]
    # The special tokens the template reads are recorded, with their text or, where the
    # source gave none, null (a placeholder): the source must still give the same.
    tokens = spec["render_inputs"].get("special_tokens", {})
    if any(text != source.special_tokens.get(name) for name, text in tokens.items()):
        changed.append("special_tokens")
    if changed:
        report.problems.append(
            f"{spec_path}: render inputs of {source.path} changed since this spec was made "
            f"({', '.join(changed)})"
        )
    if spec.get("tokens") != (
        token_tables.section(source.tokenizer, spec) if source.tokenizer else None
    ):
        report.problems.append(
            f"{spec_path}: the tokenizer of {source.path} changed since this spec was made "
            "(its tokens section differs)"
        )
    if not _overrides_applied(spec, spec_path, report):
        report.problems.append(
            f"{spec_path}: its overrides are not applied to the spec's body; rebuild it"
        )
    if spec["compiler_version"] != __version__:
        report.warnings.append(
            f"{spec_path}: made by compiler {spec['compiler_version']}, this is {__version__}"
        )
    return spec


def _render_inputs(source: TemplateSource) -> dict:
    # As build.spec_for records them.
    return {
        "bos_token": source.bos_token,
        "eos_token": source.eos_token,
        "variables": dict(source.variables),
        "tool_shape": source.tool_shape,
    }


def _overrides_applied(spec: dict, spec_path: str, report: CheckReport) -> bool:
    """Does applying the overrides again leave the spec as it is?

    A built spec is a fixed point: setting a value twice changes nothing. An override
    added by hand without a rebuild is not, and the parser does not have it yet.
    """
    overrides = spec.get("overrides", [])
    if any(o["value"] is None and o["path"].split(".")[-1].isdigit() for o in overrides):
        return True  # removing a list item twice removes two: no fixed point to test
    body = {key: value for key, value in spec.items() if key not in (*_METADATA, "overrides")}
    try:
        patched, _ = specs.apply_overrides(body, overrides, spec_path)
    except specs.SpecError as error:
        report.problems.append(str(error))
        return True
    return patched == body


def _compare_outputs(
    slug: str, spec: dict, spec_path: str, generated_dir: str, report: CheckReport
) -> None:
    for name, text in outputs(slug, spec, spec_path).items():
        path = os.path.join(generated_dir, name)
        exists = os.path.isfile(path)
        if text is None:
            if exists:
                report.problems.append(
                    f"{path}: should not exist: {spec_path} produces no such file"
                )
        elif not exists:
            report.problems.append(f"{path}: missing: {spec_path} produces it")
        elif _read(path) != text.encode("utf-8"):
            report.problems.append(f"{path}: differs from what {spec_path} produces")


def _compare_package(generated_dir: str, report: CheckReport) -> None:
    """The package's __init__.py and its runtime."""
    for name, text in package_files().items():
        path = os.path.join(generated_dir, name)
        if not os.path.isfile(path) or _read(path) != text.encode("utf-8"):
            report.problems.append(f"{path}: missing or not what the build writes")


def _compare_unclaimed(
    generated_dir: str, specs_dir: str, known: set[str], report: CheckReport
) -> None:
    """Generated files no template accounts for (a parser, a grammar, a
    response_template)."""
    for path in _files(generated_dir, (".py", ".gbnf", ".response_template.json")):
        name = os.path.basename(path)
        slug = name.split(".")[0]
        if (
            name not in package_files()
            and slug not in known
            and not os.path.exists(os.path.join(specs_dir, f"{slug}.yaml"))
        ):
            # A spec without its template is reported once, above; this is a file with neither.
            report.problems.append(f"{path}: no spec produces it")


def _template_path(spec_path: str) -> str:
    try:
        return specs.template_path_of(str(specs.load(spec_path)["template"]["path"]), spec_path)
    except specs.SpecLimitError:
        raise
    except (specs.SpecError, KeyError, TypeError):
        return "(unreadable in the spec)"


def _files(directory: str, suffixes: tuple[str, ...]) -> list[str]:
    if not os.path.isdir(directory):
        return []
    return [
        os.path.join(directory, name)
        for name in sorted(os.listdir(directory))
        if name.endswith(suffixes) and os.path.isfile(os.path.join(directory, name))
    ]


def _read(path: str) -> bytes:
    with open(path, "rb") as handle:
        return handle.read()
