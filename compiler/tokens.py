"""The tokenizer's side of a format: which of its markers the tokenizer holds as one
token, and the ids of bos, eos and every other token that ends a turn.

Servers filter and trigger on token ids, not text. Where a source has a tokenizer (a
model directory's ``tokenizer.json``, a GGUF file's token list), ``compiler.sources``
reads it into a ``TokenTable`` and the build writes the spec's ``tokens`` section from
that table and the format's markers (``section``). Standard library only: the JSON is
read with ``json``, never through the ``tokenizers`` package.

What counts as one token: a token the tokenizer matches whole in the text before its
model splits the rest — ``added_tokens`` in ``tokenizer.json`` (special or not), the
control and user-defined tokens of a GGUF list. That is what Hugging Face's tokenizers
and llama.cpp's (with special tokens parsed) both do with such a marker, and what a
model trained on it writes. A marker that merely equals an entry of the model's own
vocabulary is not counted: that vocabulary is stored byte-encoded, and the
pre-tokenizer may split the marker before the vocabulary is consulted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable

# The tokenizer's special tokens besides bos and eos, by the names Hugging Face passes
# them to a template under.
SPECIAL_TOKENS = ("unk_token", "sep_token", "pad_token", "cls_token", "mask_token")

# GGUF's token types (llama.cpp's llama_token_type): the two it matches whole.
GGUF_CONTROL = 3
GGUF_USER_DEFINED = 4


class TokenizerError(Exception):
    """A tokenizer file that is not what its format says (the caller names the file)."""


@dataclass(frozen=True)
class Token:
    text: str | None  # None: an id whose text the tokenizer does not give
    id: int | None  # None: the text is not one token of this tokenizer
    special: bool = False  # the tokenizer marks it special (a control token)

    def as_spec(self) -> dict:
        return {"text": self.text, "id": self.id, "special": self.special}


@dataclass(frozen=True)
class TokenTable:
    """What a source's tokenizer says about tokens, read once per source."""

    source: str  # "tokenizer.json" or "gguf"
    whole: dict[str, Token]  # text → the token, for every token matched whole
    bos: Token | None
    eos: Token | None
    # Other tokens that end generation (generation_config.json's eos_token_id, a GGUF's
    # end-of-turn and end-of-message ids), eos aside.
    also_end: tuple[Token, ...] = ()

    def one_token(self, text: str) -> Token:
        """``text`` as a token of this tokenizer: its id where it is one token."""
        found = self.whole.get(text)
        return found if found is not None else Token(text, None)


# --------------------------------------------------------------------------- reading


def from_tokenizer_json(
    data: Any,
    bos_text: str | None,
    eos_text: str | None,
    end_ids: Iterable[int] = (),
) -> TokenTable:
    """The table of a Hugging Face ``tokenizer.json`` (already parsed), with the bos and
    eos texts its ``tokenizer_config.json`` names and the ids its
    ``generation_config.json`` ends generation on."""
    if not isinstance(data, dict):
        raise TokenizerError("expected a JSON object")
    added = data.get("added_tokens", [])
    if not isinstance(added, list):
        raise TokenizerError("added_tokens is not a list")
    whole: dict[str, Token] = {}
    for index, entry in enumerate(added):
        if not (
            isinstance(entry, dict)
            and isinstance(entry.get("content"), str)
            and _is_id(entry.get("id"))
        ):
            raise TokenizerError(f"added_tokens[{index}] needs a string content and an integer id")
        whole[entry["content"]] = Token(entry["content"], entry["id"], entry.get("special") is True)
    vocab = _model_vocab(data.get("model"))

    def named(text: str | None) -> Token | None:
        if text is None:
            return None
        if text in whole:
            return whole[text]
        # bos/eos outside added_tokens (an old sentencepiece export): the vocabulary
        # holds them as written, so their id is found there.
        return Token(text, vocab.get(text), False)

    by_id = {token.id: token for token in whole.values()}
    eos = named(eos_text)
    also: list[Token] = []
    wanted = sorted(set(end_ids) - {eos.id if eos else None})
    if wanted:
        texts = {}
        missing = set(wanted) - set(by_id)
        if missing:
            texts = {token_id: text for text, token_id in vocab.items() if token_id in missing}
        for token_id in wanted:
            also.append(by_id.get(token_id) or Token(texts.get(token_id), token_id, False))
    return TokenTable("tokenizer.json", whole, named(bos_text), eos, tuple(also))


def _is_id(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _model_vocab(model: object) -> dict[str, int]:
    """The model's vocabulary, text → id: a mapping (BPE, WordPiece, WordLevel) or a
    list of [piece, score] pairs (Unigram, where the id is the index)."""
    if not isinstance(model, dict):
        return {}
    vocab = model.get("vocab")
    if isinstance(vocab, dict):
        return {text: token_id for text, token_id in vocab.items() if _is_id(token_id)}
    if isinstance(vocab, list):
        return {
            entry[0]: index
            for index, entry in enumerate(vocab)
            if isinstance(entry, list) and entry and isinstance(entry[0], str)
        }
    return {}


def generation_end_ids(config: object) -> list[int]:
    """The ids a ``generation_config.json`` ends generation on (one or a list)."""
    if not isinstance(config, dict):
        raise TokenizerError("expected a JSON object")
    value = config.get("eos_token_id")
    if value is None:
        return []
    values = value if isinstance(value, list) else [value]
    if not all(_is_id(item) for item in values):
        raise TokenizerError("eos_token_id is neither an integer nor a list of integers")
    return list(values)


def from_gguf(
    count: int,
    text_of: Callable[[int], str],
    types: list[int] | None,
    bos_id: int | None,
    eos_id: int | None,
    end_ids: Iterable[int] = (),
) -> TokenTable:
    """The table of a GGUF file's token list (``count`` tokens, ``text_of`` an id's
    text, read only for the tokens needed) and its ``token_type`` list, with its bos,
    eos and other end-of-generation ids (ids outside the list are dropped: the file
    does not say what they are)."""
    whole: dict[str, Token] = {}
    if types is not None:
        if len(types) != count:
            raise TokenizerError(
                f"tokenizer.ggml.token_type has {len(types)} entries for {count} tokens"
            )
        for token_id, kind in enumerate(types):
            if kind in (GGUF_CONTROL, GGUF_USER_DEFINED):
                text = text_of(token_id)
                whole.setdefault(text, Token(text, token_id, kind == GGUF_CONTROL))

    def by_id(token_id: int | None) -> Token | None:
        if token_id is None or not 0 <= token_id < count:
            return None
        kind = types[token_id] if types is not None else None
        return Token(text_of(token_id), token_id, kind == GGUF_CONTROL)

    eos = by_id(eos_id)
    also = [
        token
        for token_id in sorted(set(end_ids) - {eos_id})
        if (token := by_id(token_id)) is not None
    ]
    return TokenTable("gguf", whole, by_id(bos_id), eos, tuple(also))


# --------------------------------------------------------------------------- the spec


def markers(body: dict) -> list[str]:
    """Every marker of a spec's format (its body: reasoning, content, tools,
    end_of_turn, grammar), without the whitespace around it, in a fixed order: the
    reasoning and content markers, the end-of-turn markers, the preserved tokens, the
    tools section's markers, the word triggers."""
    found: list[str] = []

    def add(text: object) -> None:
        if isinstance(text, str) and text.strip() and text.strip() not in found:
            found.append(text.strip())

    for key in ("start", "end"):
        add(body["reasoning"].get(key))
    for key in ("start", "end"):
        add(body["content"].get(key))
    for text in body["end_of_turn"]["markers"]:
        add(text)
    for text in body["grammar"]["preserved_tokens"]:
        add(text)
    tools = body["tools"]
    for name in ("section", "call"):
        part = tools.get(name) or {}
        for key in ("start", "end"):
            add(part.get(key))
    for text in tools.get("end_of_turn_after_calls") or []:
        add(text)
    for trigger in body["grammar"]["triggers"]:
        if trigger["type"] == "word":
            add(trigger["value"])
    return found


def section(table: TokenTable, body: dict) -> dict:
    """The spec's ``tokens`` section: bos and eos, every token that ends a turn (eos,
    the tokenizer's other end ids, the end-of-turn markers that are one token), and
    each marker of the format with its id where the tokenizer holds it as one token."""
    marker_tokens = [table.one_token(text) for text in markers(body)]
    ends: list[Token] = []
    seen: set[int] = set()
    end_markers = [
        *body["end_of_turn"]["markers"],
        *(body["tools"].get("end_of_turn_after_calls") or []),
    ]
    candidates = [
        table.eos,
        *table.also_end,
        *(table.one_token(text.strip()) for text in end_markers if text.strip()),
    ]
    for token in candidates:
        if token is not None and token.id is not None and token.id not in seen:
            seen.add(token.id)
            ends.append(token)
    return {
        "source": table.source,
        "bos": table.bos.as_spec() if table.bos else None,
        "eos": table.eos.as_spec() if table.eos else None,
        "eos_tokens": [token.as_spec() for token in ends],
        "markers": [token.as_spec() for token in marker_tokens],
    }
