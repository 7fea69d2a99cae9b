#!/usr/bin/env bash
# The PyTorch transcription's tests (benchmarks/torch_reference, the GPU runs' code) in an
# environment of their own: torch is pinned in requirements-torch.txt, never in tffre's
# install. Makes .venv-torch (or $TFFRE_TORCH_VENV), installs the pins, runs the tests.
# .ci/run calls it after the main suite; extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${TFFRE_TORCH_VENV:-.venv-torch}"
PY="${PYTHON:-python3.11}"
command -v "$PY" >/dev/null 2>&1 || PY=python3
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --disable-pip-version-check -r requirements-torch.txt
# The test module skips without torch (as in the main suite): here that must fail instead.
"$VENV/bin/python" -c "import torch, transformers
print('torch', torch.__version__, '| transformers', transformers.__version__)"
# --noconftest: tests/conftest.py seeds TensorFlow, which this environment has not.
exec "$VENV/bin/python" -m pytest -q -p no:cacheprovider --noconftest --durations=5 \
    tests/benchmarks/test_torch_reference_training.py "$@"
