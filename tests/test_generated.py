"""The committed outputs: specs valid, modules standalone, builds deterministic, and
no template able to inject code into what we generate."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from compiler import spec as specs
from compiler.build import build
from compiler.sources import discover
from tests import roundtrip as rt

ROOT = rt.ROOT
TEMPLATES = os.path.join(ROOT, "templates")
HAVE_CORPUS = any(name.endswith(".jinja") for name in os.listdir(TEMPLATES))


@pytest.mark.parametrize("slug", rt.slugs())
def test_spec_is_schema_valid(slug):
    path = os.path.join(rt.SPECS, f"{slug}.yaml")
    specs.validate(specs.load(path), path)


def test_every_corpus_template_has_a_spec():
    if not HAVE_CORPUS:
        pytest.skip("no corpus: run make templates")
    stems = [s.slug for s in discover(TEMPLATES)]
    assert len(stems) == 70
    assert sorted(stems) == rt.slugs()


_BLOCKER = r"""
import sys
class Blocked:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("jinja2", "yaml", "jsonschema", "compiler", "black"):
            raise ImportError("blocked: " + name)
        return None
sys.meta_path.insert(0, Blocked())
sys.path.insert(0, ROOT)
import importlib
for slug in SLUGS:
    module = importlib.import_module("generated." + slug)
    message = module.parse("hello")
    # Where the prompt opens a reasoning block, plain text is reasoning; either way
    # nothing is lost.
    assert "hello" in (message["content"], message["reasoning_content"]), (slug, message)
    assert isinstance(module.GBNF, str)
    fallback = (module.SPEC.get("polyfills") or {}).get("fallback_call")
    if module.SPEC["tools"]["format"] == "none" and not fallback:
        assert module.TRIGGERS == [] and module.GBNF_TOOLS is None, slug
    else:
        assert all(t["type"] in (1, 2, 3) and t["value"] for t in module.TRIGGERS), slug
print("ok", len(SLUGS))
"""


def test_generated_modules_import_with_the_standard_library_alone():
    slugs = rt.slugs()
    code = f"ROOT = {ROOT!r}\nSLUGS = {slugs!r}\n" + _BLOCKER
    # -I -S: no user site, no site-packages, no current directory on the path.
    result = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"ok {len(slugs)}"


def _build(templates, tmp_path, name):
    # Spec files record the template path relative to themselves: the copy of the
    # templates sits beside the specs as in the repository.
    copy = tmp_path / name / "templates"
    shutil.copytree(templates, copy)
    out_specs, out_gen = tmp_path / name / "specs", tmp_path / name / "gen"
    # The build re-applies the reviewed overrides of the spec files it rewrites: start
    # from the committed ones, as `make specs` does.
    out_specs.mkdir()
    for spec in Path(rt.SPECS).glob("*.yaml"):
        shutil.copyfile(spec, out_specs / spec.name)
    build(discover(str(copy)), str(out_specs), str(out_gen), log=lambda m: None)
    return out_specs, out_gen


def _tree(directory):
    return {
        path.name: path.read_bytes() for path in sorted(directory.iterdir()) if path.is_file()
    }


def test_build_is_deterministic_and_matches_the_committed_outputs(tmp_path):
    if not HAVE_CORPUS:
        pytest.skip("no corpus: run make templates")
    specs_a, gen_a = _build(TEMPLATES, tmp_path, "a")
    specs_b, gen_b = _build(TEMPLATES, tmp_path, "b")
    assert _tree(specs_a) == _tree(specs_b)
    assert _tree(gen_a) == _tree(gen_b)
    # The committed files are what the compiler makes (templates/ holds the corpus).
    committed_specs = {
        k: v for k, v in _tree(Path(rt.SPECS)).items() if k.endswith(".yaml")
    }
    assert committed_specs == _tree(specs_a)
    committed_gen = {
        k: v
        for k, v in _tree(Path(ROOT) / "generated").items()
        if k.endswith((".py", ".gbnf", ".json"))
    }
    assert committed_gen == _tree(gen_a)


# A template whose markers are built to break out of a Python string or a GBNF literal.
HOSTILE_START = "<think\"\"\"'\\\\#{{ '}' }}__import__('os').system('touch PWNED')>"
HOSTILE_END = "</think\"\"\"'\\\\#]::=\">"
HOSTILE = (
    "{%- for m in messages -%}"
    "{%- if m.role == 'assistant' -%}"
    + HOSTILE_START
    + "{{ m.reasoning_content }}"
    + HOSTILE_END
    + "{{ m.content }}<|end\"'|>"
    "{%- else -%}<|start|>{{ m.role }}\n{{ m.content }}<|end\"'|>{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}<|start|>assistant\n{%- endif -%}"
)


def test_hostile_markers_stay_strings(tmp_path):
    templates = tmp_path / "templates"
    templates.mkdir()
    (templates / "hostile.jinja").write_text(HOSTILE, encoding="utf-8")
    out_specs, out_gen = _build(templates, tmp_path, "h")
    spec = specs.load(str(out_specs / "hostile.yaml"))
    start = spec["reasoning"]["start"]
    assert "__import__('os')" in start, spec["reasoning"]
    # Import the generated module in a fresh interpreter in the temp directory.
    code = (
        "import sys; sys.path.insert(0, %r)\n"
        "import hostile\n"
        "m = hostile.parse(hostile.SPEC['reasoning']['start'] + 'R' + "
        "hostile.SPEC['reasoning']['end'] + 'C')\n"
        "assert m['reasoning_content'] == 'R' and m['content'] == 'C', m\n"
        "print('ok')\n" % str(out_gen)
    )
    result = subprocess.run(
        [sys.executable, "-I", "-c", code], capture_output=True, text=True, cwd=tmp_path
    )
    assert result.stdout.strip() == "ok", result.stderr
    assert not (tmp_path / "PWNED").exists()
    assert not os.path.exists(os.path.join(ROOT, "PWNED"))


@pytest.mark.parametrize(
    "body,fragment",
    [
        ("{{ ''.__class__.__mro__[1].__subclasses__() }}", "evil.jinja:1"),
        ("\n{% for i in range(100000) %}{% for j in range(100000) %}"
         "{% endfor %}{% endfor %}", "evil.jinja:2"),
    ],
    ids=["class-escape", "endless-loop"],
)
def test_bad_templates_fail_cleanly(tmp_path, body, fragment):
    templates = tmp_path / "templates"
    templates.mkdir()
    (templates / "evil.jinja").write_text(body, encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "compiler", "build", "--templates", str(templates),
         "--specs", str(tmp_path / "s"), "--generated", str(tmp_path / "g")],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )
    assert result.returncode == 2
    assert fragment in result.stderr
    assert "Traceback" not in result.stderr
