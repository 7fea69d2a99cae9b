#!/usr/bin/env bash
# One-command install of tffre and everything it needs into ./.venv (or $TFFRE_VENV).
#
#   bash install.sh            # CPU
#   TFFRE_GPU=1 bash install.sh  # CUDA TensorFlow 2.14 (tensorflow[and-cuda]==2.14.1)
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
"${PIP[@]}" install -q -r requirements.txt
if [ "${TFFRE_GPU:-0}" = "1" ]; then
    "${PIP[@]}" install -q "tensorflow[and-cuda]==2.14.1" "numpy~=1.25.2"
fi
"${PIP[@]}" install -q --no-deps tensorflow-federated==0.87.0
"${PIP[@]}" install -q --no-deps --no-build-isolation -e .
"$VENV/bin/python" -c "import tensorflow as tf, tensorflow_federated as tff, tffre, optimizers; print('tffre', tffre.__version__, '| TF', tf.__version__, '| TFF', tff.__version__, '| GPUs', len(tf.config.list_physical_devices('GPU')))"
