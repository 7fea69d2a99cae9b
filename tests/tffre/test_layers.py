"""Data flows one way: every import in the package (function-level ones included) goes to its
own layer or below, and no modules import each other in a circle.

The declared order (DEVELOPERS.md, "Layers"), lowest first; a module belongs to the layer of
its longest matching prefix.
"""

import ast
import os

import pytest

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
LAYERS = (
    ("base", ("tffre", "tffre.errors", "tffre.jsonio", "tffre.resources", "tffre.types_util",
              "tffre.runtime", "tffre.metrics", "tffre.plots", "tffre.hparams", "tffre.lazy")),
    ("data", ("tffre.data",)),
    ("text", ("tffre.text",)),
    ("models", ("tffre.models", "optimizers")),
    ("client work / aggregators", ("tffre.client_model", "tffre.definition", "tffre.client_work",
                                   "tffre.aggregators", "tffre.privacy")),
    ("round", ("tffre.mapreduce",)),
    ("executors", ("tffre.execution", "tffre.process")),
    ("algorithms", ("tffre.algorithms", "tffre.registry")),
    ("builder", ("tffre.builder",)),
    ("runner", ("tffre.runner", "tffre.evaluation", "tffre.bundle", "tffre.records")),
    ("tasks", ("tffre.tasks",)),
    ("federation", ("tffre.federation",)),
    ("experiments", ("tffre.experiments", "tffre.paper_tables")),
    ("CLI", ("tffre.config", "tffre.cli", "tffre.predict", "tffre.sweep", "tffre.deploy",
             "tffre.report", "tffre.__main__")),
)


def layer_of(module):
    """The index of ``module``'s layer (its longest matching prefix), or None outside ours."""
    best, index = "", None
    for i, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > len(best):
                best, index = prefix, i
    return index


def package_modules():
    """{module name: file path} of every module of tffre and optimizers."""
    out = {}
    for package in ("tffre", "optimizers"):
        for folder, _, files in os.walk(os.path.join(ROOT, package)):
            for name in files:
                if name.endswith(".py"):
                    path = os.path.join(folder, name)
                    rel = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
                    out[rel[:-len(".__init__")] if rel.endswith(".__init__") else rel] = path
    return out


def imports_of(path, module, modules):
    """The package modules ``path`` imports anywhere in it (``from a import b`` counts
    ``a.b`` when that is a module, else ``a``)."""
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                     for a in node.names]
        else:
            continue
        for name in names:
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name and name != module:
                found.add(name)
    return found


@pytest.fixture(scope="module")
def graph():
    modules = package_modules()
    return {m: imports_of(p, m, modules) for m, p in modules.items()}


def test_every_module_has_a_layer(graph):
    assert [m for m in graph if layer_of(m) is None] == []


def test_no_import_runs_back_up(graph):
    back = sorted(f"{m} ({LAYERS[layer_of(m)][0]}) imports {t} ({LAYERS[layer_of(t)][0]})"
                  for m, targets in graph.items() for t in targets
                  if layer_of(t) > layer_of(m))
    assert back == [], "\n".join(back)


def test_no_circle(graph):
    """Tarjan's strongly connected components: every one must be a single module."""
    index, low, on_stack, stack, circles = {}, {}, set(), [], []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    assert circles == []


def test_the_checker_finds_a_back_edge_and_a_circle(tmp_path):
    """The rules above are not vacuous: a planted back edge and circle are reported."""
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text("def f():\n    from tffre import cli\n")
    b.write_text("from tffre.data import sentence_sets\n")
    modules = {"tffre.data.sentence_sets": str(b), "tffre.cli": "", "tffre.data.x": str(a)}
    found = imports_of(str(a), "tffre.data.x", modules)
    assert found == {"tffre.cli"} and layer_of("tffre.cli") > layer_of("tffre.data.x")
    assert imports_of(str(b), "tffre.cli", modules) == {"tffre.data.sentence_sets"}


#: What the transport-neutral federation core (``tffre/federation/``) must never import: a
#: transport's package or its library (DEVELOPERS.md, "Layers").
TRANSPORTS = ("flwr", "tffre.deploy")


def named_imports(path):
    """Every module name ``path`` imports anywhere in it, in or out of the package (``from a
    import b`` counts ``a`` and ``a.b``; relative imports are left out)."""
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
    return found


def transport_imports(paths):
    """["module imports name"] of the modules ({name: path}) that import a transport."""
    return sorted(f"{m} imports {name}" for m, path in paths.items()
                  for name in named_imports(path)
                  if any(name == t or name.startswith(t + ".") for t in TRANSPORTS))


def test_the_federation_core_imports_no_transport():
    federation = {m: p for m, p in package_modules().items()
                  if m == "tffre.federation" or m.startswith("tffre.federation.")}
    assert {"tffre.federation.round_driver", "tffre.federation.site_runtime"} <= set(federation)
    assert transport_imports(federation) == []


def test_the_transport_check_finds_flower_and_deploy(tmp_path):
    """The check above is not vacuous: a planted Flower import and deploy import are found,
    in a function body too."""
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text("def f():\n    from flwr.app import Message\n")
    b.write_text("from tffre import deploy\nimport tffre.federation.messages\n")
    assert transport_imports({"x.a": str(a), "x.b": str(b)}) == [
        "x.a imports flwr.app", "x.a imports flwr.app.Message", "x.b imports tffre.deploy"]
