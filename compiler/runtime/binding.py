"""How a format module runs the runtime: ``bind``.

generated/_runtime.py is this package's modules as one module. A format module
(generated/<slug>.py) holds its format's constants and calls ``bind``, which runs the
runtime's code once more, in a namespace of its own that starts with those constants,
and hands back the public functions. Each format thus gets its own functions, reading
its constants as globals (as fast as constants of its own), from one copy of the code.
A standalone module (``chatfmt export standalone``) writes the constants
above the runtime instead, and has no need of this.
"""

from __future__ import annotations

import sys
from typing import Any

from .format import FORMAT_NAMES

# The interface between format modules and the runtime: what a format module gives
# (format.py) and what it takes back (PUBLIC). Bumped by hand when either changes, so
# that a module and a runtime from different builds refuse each other.
INTERFACE = 4

# What ``bind`` hands back, in this order.
PUBLIC = (
    "parse",
    "StreamParser",
    "grammar",
    "tool_call_grammar",
    "structural_tag",
    "lark_grammar",
    "prepare_messages",
    "compile_tools",
)

# The code of the module this is part of, as the import ran it: what ``bind`` runs
# again for each format (read off the running frame, so it is compiled once, with or
# without a bytecode cache).
_CODE = sys._getframe(0).f_code


def bind(namespace: dict[str, Any], interface: int) -> tuple[Any, ...]:
    """The public functions (``PUBLIC``, in order) of the runtime run on the format
    whose constants are in ``namespace`` (a format module's globals), for a module
    generated against runtime interface ``interface``."""
    module = namespace.get("__name__", "a format module")
    if interface != INTERFACE:
        raise ImportError(
            f"{module} was generated for runtime interface {interface}, but {__name__} "
            f"has interface {INTERFACE}: rebuild the folder with one compiler "
            "(chatfmt build)"
        )
    scope = {name: namespace[name] for name in FORMAT_NAMES if name in namespace}
    # The functions' __module__: the format module, where they are found by name.
    scope["__name__"] = module
    exec(_CODE, scope)
    return tuple(scope[name] for name in PUBLIC)
