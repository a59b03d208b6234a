#!/usr/bin/env bash
# README command 2: the whole test suite (Python, contracts on the embedded chain and on
# Anvil, forge unit/fuzz tests, CUDA sources via ptx + CPU emulation).
# Extra arguments go to pytest (e.g. -k softfloat, -m 'not anvil').
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
cd "$VERDE_ROOT"
workers="${VERDE_TEST_WORKERS:-2}"
# torch's own ops get the cores a worker's share (CI: 2 workers on 2 cores, 1 each): at torch's
# default, a thread per core in every worker, they contend (test_hf_families -n 2: 69, 68 -> 63, 63 s,
# alternating runs). RepOps' kernels keep theirs (the CPUs available), so its multi-threaded paths
# stay the ones most tests run; tests that vary thread counts set them outright.
share=$(nproc)
[[ "$workers" =~ ^[1-9][0-9]*$ ]] && share=$(( share / workers > 0 ? share / workers : 1 ))
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-$share}"
exec "$VENV/bin/python" -m pytest -n "$workers" --dist loadgroup "$@"
