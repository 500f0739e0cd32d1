"""Loading generated parsers without installing them: a format module from any folder
(with the runtime beside it, whatever ``sys.path`` holds), or a spec's parser made in
memory."""

from __future__ import annotations

import importlib.util
import itertools
import os
import sys
import types

_LOADS = itertools.count()


def load_generated(directory: str | os.PathLike, slug: str) -> types.ModuleType:
    """``<directory>/<slug>.py`` with the runtime beside it (its ``from . import
    _runtime``), imported as part of a package made for this one load: that folder's
    runtime, whatever else ``sys.path`` holds, read afresh each time."""
    directory = os.path.abspath(directory)
    package = f"_chatfmt_loaded_{next(_LOADS)}"
    holder = types.ModuleType(package)
    holder.__path__ = [directory]
    names = (package, f"{package}.{slug}", f"{package}._runtime")
    sys.modules[package] = holder
    try:
        module_spec = importlib.util.spec_from_file_location(
            names[1], os.path.join(directory, f"{slug}.py")
        )
        if module_spec is None or module_spec.loader is None:
            raise ImportError(f"cannot load {slug}.py from {directory}")
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[names[1]] = module
        module_spec.loader.exec_module(module)
        return module
    finally:
        for name in names:
            sys.modules.pop(name, None)


def load_spec(slug: str, spec: dict, origin: str | None = None) -> types.ModuleType:
    """The parser a resolved spec compiles to, made in memory and written nowhere."""
    from . import model
    from .codegen import module as module_codegen

    return module_codegen.load(model.build(spec, slug=slug, origin=origin or f"{slug}.yaml"))
