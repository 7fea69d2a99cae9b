#!/usr/bin/env bash
# The opt-in live deployment tests (a SuperLink and SuperNodes on loopback, each bounded in
# time, stopping by themselves): Flower's equality with the simulation, the image task's
# sites, the end-to-end run and the faults (a killed site, a killed SuperLink, resume).
# One after the other (TFFRE_TEST_WORKERS=0: each starts several processes of its own),
# about 6-11 minutes on a 2-core machine; run after the README's test command.
set -euo pipefail
cd "$(dirname "$0")/.."
export TFFRE_DEPLOY_EQUALITY=1 TFFRE_DEPLOY_FAULTS=1 TFFRE_DEPLOY_PLAIN=1
export FLWR_TELEMETRY_ENABLED=0
TFFRE_TEST_WORKERS=0 bash run_tests.sh tests/tffre/deploy/test_deploy_equality.py \
    tests/tffre/tasks/test_image_sites.py tests/tffre/deploy/test_deploy_e2e.py \
    tests/tffre/deploy/test_deploy_faults_live.py
