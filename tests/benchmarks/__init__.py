"""`make bench`: our generated parsers next to transformers' response parser.

Not collected by pytest (``norecursedirs`` in pyproject.toml); run with
``python -m tests.benchmarks.bench`` from the repository root, in a virtualenv that has
``transformers==5.23.0`` (the Makefile's ``.venv-bench``).
"""
