# Every target installs what it needs into its own virtualenv: a fresh machine runs
# `make specs` and `make test` and nothing else.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: all templates specs check test clean

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

test: templates
	$(PY) -m pytest -q

clean:
	rm -rf $(VENV) .cache
