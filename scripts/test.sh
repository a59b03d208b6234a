#!/usr/bin/env bash
# README command 2: the whole test suite (Python, contracts on the embedded chain and on
# Anvil, forge unit/fuzz tests, CUDA sources via ptx + CPU emulation).
# Extra arguments go to pytest (e.g. -k softfloat, -m 'not anvil').
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
cd "$VERDE_ROOT"
exec "$VENV/bin/python" -m pytest -n "${VERDE_TEST_WORKERS:-2}" --dist loadgroup "$@"
