"""One meaning per name in the registry's optimizer vocabulary (issue 68 item 5).

``local_optimizer`` is the common hyperparameter (``--local-optimizer``, config key, saved
config.json): it names an optimizer *family*. A row's own optimizer is its
``client_optimizer``, a key of ``CLIENT_OPTIMIZERS``. The families are declared once
(``tffre.definition.OPTIMIZER_FAMILIES``); a client optimizer's ``kind`` ("sgd", "adam", which
keys a task's own learning rates) is another word. These tests fail if a second meaning, or a
second family list, comes back.
"""

import ast
import dataclasses
import importlib
import os

import pytest

from tffre import definition, registry, server_optimizers, tasks
from tffre.hparams import ParamsError

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")


def package_trees():
    """(path relative to the repository, AST) of every module of tffre and optimizers."""
    for package in ("tffre", "optimizers"):
        for folder, _, files in os.walk(os.path.join(ROOT, package)):
            for name in sorted(files):
                if name.endswith(".py"):
                    path = os.path.join(folder, name)
                    yield (os.path.relpath(path, ROOT),
                           ast.parse(open(path, encoding="utf-8").read(), path))


def bound_names(tree):
    """(name, node) of everything ``tree`` binds or declares: assignments and annotated
    fields, functions, classes, parameters and imports-as."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        yield name.id, node
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield node.name, node
        elif isinstance(node, ast.arg):
            yield node.arg, node


def test_local_optimizer_names_the_family_hyperparameter_only():
    """The identifier ``local_optimizer`` is declared once, as the common hyperparameter;
    nothing else (a registry field, a function, a table) is named for it."""
    declared, other = [], []
    for path, tree in package_trees():
        for name, node in bound_names(tree):
            low = name.lower()
            if low == "local_optimizer" and isinstance(node, ast.AnnAssign):
                declared.append(path)
            elif "local_optimizer" in low or low == "localoptimizer":
                other.append(f"{path}:{node.lineno} {name}")
    assert declared == [os.path.join("tffre", "definition.py")]
    assert other == []
    assert "local_optimizer" in definition.Hparams.names()
    assert "local_optimizer" not in {f.name for f in dataclasses.fields(registry.AlgorithmSpec)}


def test_the_optimizer_families_are_declared_once():
    """One family list: nothing else in the package binds a name for families, and no other
    tuple, list or set spells the families out."""
    bindings, literals = [], []
    families = set(definition.OPTIMIZER_FAMILIES)
    for path, tree in package_trees():
        for name, node in bound_names(tree):
            if "famil" in name.lower() and not isinstance(node, ast.arg) and \
                    not isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                if name != "family":   # a loop's or a function's one family
                    bindings.append(f"{path}:{node.lineno} {name}")
            if name == "family" and isinstance(node, ast.AnnAssign):
                bindings.append(f"{path}:{node.lineno} field family")
        for node in ast.walk(tree):
            if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
                words = {e.value for e in node.elts if isinstance(e, ast.Constant)}
                # The server's optimizers (sgd, sgdm, adam, ...) are another vocabulary, of
                # the server step, which shares two of its words.
                server_words = set(server_optimizers.SERVER_OPTIMIZERS)
                if families <= words and words != server_words:
                    literals.append(f"{path}:{node.lineno}")
    assert bindings == [f"{os.path.join('tffre', 'definition.py')}:"
                        f"{_line_of('OPTIMIZER_FAMILIES')} OPTIMIZER_FAMILIES"]
    assert literals == [f"{os.path.join('tffre', 'definition.py')}:"
                        f"{_line_of('OPTIMIZER_FAMILIES')}"]
    assert not hasattr(registry, "OPTIMIZER_FAMILIES")


def _line_of(name):
    """The line of definition.py that assigns ``name``."""
    text = open(definition.__file__, encoding="utf-8").read().splitlines()
    return next(i + 1 for i, line in enumerate(text) if line.startswith(f"{name} = "))


def test_every_form_is_a_declared_family_and_a_registered_optimizer():
    families = definition.OPTIMIZER_FAMILIES
    reached = set()
    for key, optimizer in registry.CLIENT_OPTIMIZERS.items():
        assert optimizer.kind in registry.OPTIMIZER_KINDS, key
        for family, replacement in optimizer.forms.items():
            assert family in families, (key, family)
            assert replacement in registry.CLIENT_OPTIMIZERS, (key, replacement)
            # A replacement is its family's own form: replacing twice is replacing once.
            assert registry.CLIENT_OPTIMIZERS[replacement].forms[family] == replacement
            reached.add(family)
    assert reached == set(families)   # every --local-optimizer value replaces something
    for row in registry.ALGORITHMS.values():
        assert row.client_optimizer in registry.CLIENT_OPTIMIZERS, row.name


def test_local_optimizer_takes_exactly_the_families():
    for family in definition.OPTIMIZER_FAMILIES:
        assert registry.resolve_hparams("FedAvg", local_optimizer=family).local_optimizer == \
            family
    with pytest.raises(ParamsError, match="local_optimizer"):
        registry.resolve_hparams("FedAvg", local_optimizer="sgd")   # a kind, not a family


# The swaps as FedCB's setting needs them (its section 4.1: every method with Adam; its
# authors' scripts: SGD with momentum), written out by hand: a proximal optimizer keeps its
# proximal term under Adam (PGD -> PAdam) and has no momentum-SGD form.
SWAPS = {
    "adam": {"sgd": "tf_adam", "pgd": "padam", "self_adam": "self_adam", "tf_adam": "tf_adam",
             "padam": "padam", "sgdm": None},
    "sgdm": {"sgd": "sgdm", "pgd": None, "self_adam": "sgdm", "tf_adam": "sgdm", "padam": None,
             "sgdm": "sgdm"},
}


@pytest.mark.parametrize("family", sorted(SWAPS))
def test_each_rows_optimizer_under_each_family(family):
    assert sorted(SWAPS) == sorted(definition.OPTIMIZER_FAMILIES)
    for row in registry.ALGORITHMS.values():
        want = SWAPS[family][row.client_optimizer]
        hp = dataclasses.replace(registry.resolve_hparams(row.name), local_optimizer=family)
        if want is None:
            with pytest.raises(ValueError, match=f"{row.name}: its {row.client_optimizer} "
                                                 f"optimizer has no {family} form"):
                registry.client_optimizer_of(row, hp)
        else:
            assert registry.client_optimizer_of(row, hp) == want, row.name


def test_a_tasks_learning_rates_are_keyed_by_kind():
    for name in tasks.MODULES:
        task = importlib.import_module(f"tffre.tasks.{name}").TASK
        assert set(task.learning_rates) <= set(registry.OPTIMIZER_KINDS), name
