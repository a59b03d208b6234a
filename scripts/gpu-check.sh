#!/usr/bin/env bash
# The GPU checks of the CUDA backend in one command, for a lent GPU machine (the `device`
# tool): there Python, torch and CuPy are preinstalled and nothing can be downloaded, so
# this uses them as they are (no venv) with the repository on PYTHONPATH.
#   bash scripts/gpu-check.sh [--sweep]   # results also copied to $OUT when it is set
# 1. the self-check (our NVRTC path, canaries vs the CPU reference), the PTX check;
# 2. every gpu test (every op GPU vs CPU bitwise on normal, subnormal and signed-zero data,
#    20 AdamW steps of both models with the CPU's hash, subnormal activations, a device
#    built with -ftz=true refused);
# 3. benchmarks/repops_cuda.py, which records the test counts in repops_cuda.json.
# Exits non-zero if any test failed.
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
tmp="$(mktemp -d)"
python - <<'PY' || exit 1
import cupy, torch
from repops.backends import get
print("torch", torch.__version__, "cuda", torch.cuda.is_available(), "| cupy", cupy.__version__,
      "devices", cupy.cuda.runtime.getDeviceCount())
get("cuda")  # compiles through repops.cuda.compile and runs the self-check: a BackendError stops here
from repops.cuda.device import device
from repops.cuda.compile import nvrtc
print(f"self-check passed on {device().gpu} (sm_{device().arch}), NVRTC {nvrtc().version} at {nvrtc().path}")
PY
python -m pytest -q -m gpu tests/cuda -p no:cacheprovider -o addopts="" \
    --junitxml="$tmp/gpu.xml" 2>&1 | tail -30
rc=${PIPESTATUS[0]}
python benchmarks/repops_cuda.py --sizes 1024 2048 4096 8192 --gpu-tests "$tmp/gpu.xml" "$@" || rc=1
if [ -n "${OUT:-}" ]; then cp benchmarks/results/repops_cuda.json benchmarks/results/repops_cuda.png "$OUT"/; fi
exit "$rc"
