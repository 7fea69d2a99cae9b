"""A non-editable install of tffre works: package data ships in the wheel.

Builds a wheel from a copy of the checkout (building in place would write
build/ and *.egg-info into it), installs it with --no-deps into a fresh venv
that sees this venv's dependencies through a .pth path entry, and uses tffre
from a folder outside the checkout.
"""

import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

_REPO = Path(__file__).resolve().parents[1]

_CHECK_SCRIPT = """
import os, sys

venv = os.path.realpath(sys.argv[1])
import tffre, tffre.data.imcs_dialogues, tffre.resources, tffre.text
import optimizers

def inside(path, folder):
    return os.path.realpath(path).startswith(os.path.realpath(folder) + os.sep)

# The dependencies come from the project venv's site-packages as a plain path
# entry: its .pth files, among them the editable install's finder, are not run.
editable = [m for m in sys.modules if m.startswith("__editable__")]
editable += [f for f in sys.meta_path if "editable" in type(f).__module__ + repr(f)]
assert not editable, editable
assert inside(tffre.__file__, venv), tffre.__file__
assert inside(optimizers.__file__, venv), optimizers.__file__

package = os.path.dirname(tffre.__file__)
dictionary = tffre.text.default_dictionary_path()
assert os.path.isfile(dictionary) and inside(dictionary, package), dictionary
train = tffre.resources.path("imcs_sample", "IMCS-V2_train.json")
assert os.path.isfile(train) and inside(train, package), train

tokens = tffre.text.MedicalSegmenter().cut("患儿确诊支气管肺炎")
assert "支气管肺炎" in tokens, tokens

splits = tffre.data.imcs_dialogues.load_imcs(tffre.resources.path("imcs_sample"), verbose=False)
assert len(splits["train"]) == 320, {k: len(v) for k, v in splits.items()}

from tffre.data.sentence_sets import load_re
examples, labels = load_re("i2b2", tffre.resources.path("re_sample", "i2b2"))
assert inside(tffre.resources.path("re_sample", "i2b2"), package)
assert len(examples) == 696 and labels[0] == "None", (len(examples), labels)
gad, _ = load_re("gad", tffre.resources.path("re_sample", "gad"))
assert len(gad) == 560, len(gad)
print("ok")
"""


def _run(cmd, **kwargs):
    proc = subprocess.run([str(c) for c in cmd], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, timeout=240, **kwargs)
    assert proc.returncode == 0, f"{cmd}:\n{proc.stdout.decode()[-4000:]}"
    return proc.stdout.decode()


def test_wheel_install_outside_the_checkout(tmp_path):
    source = tmp_path / "source"
    shutil.copytree(_REPO, source, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache",
        "results"))
    wheels = tmp_path / "wheels"
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
          "-w", wheels, source])
    (wheel,) = wheels.glob("tffre-*.whl")

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", venv])
    python = venv / "bin" / "python"
    site = Path(_run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"])
                .strip())
    (site / "project_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    _run([sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-deps",
          "--no-index", wheel])

    workdir = tmp_path / "elsewhere"
    workdir.mkdir()
    (workdir / "check.py").write_text(textwrap.dedent(_CHECK_SCRIPT))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    out = _run([python, "check.py", venv], cwd=workdir, env=env)
    assert out.split()[-1:] == ["ok"], out
