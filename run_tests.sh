#!/usr/bin/env bash
# The test command (README): runs the suite with the project's venv, one pytest worker per
# core (at most 4; each worker is a TensorFlow process of 1-2 GiB). TFFRE_TEST_WORKERS=0 runs
# it in this process.
set -euo pipefail
cd "$(dirname "$0")"
VENV="${TFFRE_VENV:-.venv}"
WORKERS="${TFFRE_TEST_WORKERS:-auto}"
PARALLEL=()
if [ "$WORKERS" != "0" ]; then
    # loadfile: a test module's tests share one worker and its module-scoped fixtures.
    # --no-loadscope-reorder: the modules in the order tests/conftest.py gives them, the
    # slowest first (SLOW_MODULES), not pytest-xdist's (most tests first, which left the
    # long one-test modules for last).
    PARALLEL=(-n "$WORKERS" --maxprocesses 4 --dist loadfile --no-loadscope-reorder)
fi
# --durations: the slowest tests in every log, to keep the suite within its budget.
exec "$VENV/bin/python" -m pytest -q -p no:cacheprovider --durations=25 "${PARALLEL[@]}" "$@"
