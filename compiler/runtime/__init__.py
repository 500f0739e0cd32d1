"""The runtime every generated parser module runs on.

These are ordinary modules: imported, linted, type-checked and unit-tested here
(tests/runtime/), with the neutral format of ``format.py``. The build writes them, one
after another, as one module, generated/_runtime.py (compiler/codegen/runtime_module.py);
each format module runs it on its own constants through ``binding.bind``.
"""
