"""Loads a MkDocs hook (docs/hooks/NAME.py) as a module, as MkDocs does: by its file path."""

import importlib.util
import os

HOOKS = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "hooks")


def load_hook(filename):
    """The hook module ``docs/hooks/<filename>``."""
    path = os.path.join(HOOKS, filename)
    name = "tffre_docs_" + os.path.splitext(filename)[0] + "_hook"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
