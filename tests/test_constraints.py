"""constraints.txt (install.sh's -c file) agrees with the requirements files: every package
they name is pinned there, to a version their own specifier accepts; and no public function
or constructor of tffre/ or optimizers/ takes more than 8 parameters."""

import ast
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

_REPO = Path(__file__).resolve().parents[1]


def _lines(name):
    for line in (_REPO / name).read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            yield line


def _pins():
    pins = {}
    for line in _lines("constraints.txt"):
        requirement = Requirement(line)
        specs = list(requirement.specifier)
        assert len(specs) == 1 and specs[0].operator == "==", f"constraints.txt: {line!r} is not a pin"
        pins[canonicalize_name(requirement.name)] = specs[0].version
    return pins


@pytest.mark.parametrize("name", ["requirements.txt", "requirements-docs.txt",
                                  "requirements-gpu.txt"])
def test_every_requirement_is_pinned_where_its_specifier_accepts(name):
    pins = _pins()
    for line in _lines(name):
        requirement = Requirement(line)
        key = canonicalize_name(requirement.name)
        if name == "requirements-gpu.txt" and key not in pins:
            continue    # the CUDA libraries: pinned in their own file, absent from a CPU install
        assert key in pins, f"{name}: {requirement.name} is not in constraints.txt"
        assert requirement.specifier.contains(pins[key], prereleases=True), (
            f"{name}: {line!r} does not accept constraints.txt's {pins[key]}")


def test_filelock_stays_before_its_fork_hooks():
    # filelock 4.3's fork hooks aborted a deployment site's process in CI (DEVELOPERS.md).
    assert Version(_pins()["filelock"]) < Version("4.3")


# Public functions and constructors of tffre/ and optimizers/ take at most this many parameters
# (issue 68 item 3): more is a sign that what belongs together wants a typed object.
MAX_PARAMETERS = 8
# Issue 68 item 3: still over the limit, in files that other work of issue 68 is changing;
# each goes from this list when its parameters are grouped.
WIDE_ALLOWED = {
    "tffre/hparams.py:param",
}


def _parameters(function, method):
    """How many parameters ``function`` takes, keyword-only and ``*args``/``**kwargs``
    included, ``self``/``cls`` not."""
    args = function.args
    count = (len(args.posonlyargs) + len(args.args) + len(args.kwonlyargs)
             + (args.vararg is not None) + (args.kwarg is not None))
    static = any(isinstance(d, ast.Name) and d.id == "staticmethod"
                 for d in function.decorator_list)
    return count - (1 if method and not static else 0)


def _public_functions(tree):
    """(qualified name, ast node, is a method) of a module's public functions and its public
    classes' constructors and public methods."""
    functions = (ast.FunctionDef, ast.AsyncFunctionDef)
    for node in tree.body:
        if isinstance(node, functions) and not node.name.startswith("_"):
            yield node.name, node, False
        if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            for item in node.body:
                if isinstance(item, functions) and (item.name == "__init__"
                                                    or not item.name.startswith("_")):
                    yield f"{node.name}.{item.name}", item, True


def wide_functions(root=_REPO):
    """{"path:name": parameters} of the public functions and constructors of tffre/ and
    optimizers/ over :data:`MAX_PARAMETERS`."""
    wide = {}
    for package in ("tffre", "optimizers"):
        for path in sorted((root / package).rglob("*.py")):
            tree = ast.parse(path.read_text(), filename=str(path))
            for name, node, method in _public_functions(tree):
                count = _parameters(node, method)
                if count > MAX_PARAMETERS:
                    wide[f"{path.relative_to(root).as_posix()}:{name}"] = count
    return wide


def test_no_public_function_takes_more_than_eight_parameters():
    wide = wide_functions()
    over = {name: n for name, n in wide.items() if name not in WIDE_ALLOWED}
    assert not over, ("more than 8 parameters (group what belongs together in a typed "
                      f"object): {over}")


def test_the_parameter_count_sees_every_kind_of_parameter(tmp_path):
    # The walker on a module whose counts are known by hand: 9 counted parameters fail, 8 pass,
    # self and a static method's first parameter are told apart.
    (tmp_path / "tffre").mkdir()
    (tmp_path / "optimizers").mkdir()
    (tmp_path / "tffre" / "m.py").write_text(
        "def wide(a, /, b, *c, d, e=1, **f): pass\n"           # 6
        "def nine(a, b, c, d, e, f, g, *, h, i): pass\n"       # 9
        "def _private(a, b, c, d, e, f, g, h, i): pass\n"
        "class K:\n"
        "    def __init__(self, a, b, c, d, e, f, g, h): pass\n"   # 8 without self
        "    def method(self, a, b, c, d, e, f, g, h, *args): pass\n"   # 9
        "    @staticmethod\n"
        "    def static(a, b, c, d, e, f, g, h, i): pass\n"    # 9
        "    def _hidden(self, a, b, c, d, e, f, g, h, i): pass\n")
    assert wide_functions(tmp_path) == {"tffre/m.py:nine": 9, "tffre/m.py:K.method": 9,
                                        "tffre/m.py:K.static": 9}
