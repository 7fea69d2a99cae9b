"""TensorFlow on first use: declarations (hyperparameters, the registry) import without it.

An algorithm module declares its hyperparameters beside the TensorFlow code of
its definition; the command line reads those declarations to build its flags,
and must answer ``--help`` without importing TensorFlow (seconds). Such
modules write ``from tffre.lazy import tf``: the name behaves as the
``tensorflow`` module, imported when one of its attributes is first read (at
the first trace, never at import); ``np`` likewise for numpy. Do not subclass a TensorFlow class at module
level in such a module: that reads ``tf`` at import.
"""

import importlib


class LazyModule:
    """A module imported on its first attribute access."""

    def __init__(self, name):
        self._name = name
        self._module = None

    def __getattr__(self, attr):
        if self._module is None:
            self._module = importlib.import_module(self._name)
        return getattr(self._module, attr)

    def __repr__(self):
        return f"<lazy module {self._name!r}>"


tf = LazyModule("tensorflow")
np = LazyModule("numpy")
