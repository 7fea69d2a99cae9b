"""constraints.txt (install.sh's -c file) agrees with the requirements files: every package
they name is pinned there, to a version their own specifier accepts."""

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
