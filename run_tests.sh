#!/usr/bin/env bash
# The test command (README): runs the suite with the project's venv.
set -euo pipefail
cd "$(dirname "$0")"
VENV="${TFFRE_VENV:-.venv}"
exec "$VENV/bin/python" -m pytest -q -p no:cacheprovider "$@"
