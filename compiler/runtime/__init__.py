"""The runtime every generated parser module is made of.

These are ordinary modules: imported, linted, type-checked and unit-tested here
(tests/runtime/). A generated module is one standalone file: the generator
(compiler/codegen/module.py) sets the format's constants declared in ``format.py``,
copies in the definitions of these modules that the format reaches, folds the
branches its constants decide, and leaves out the rest.
"""
