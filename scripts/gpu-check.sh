#!/usr/bin/env bash
# The GPU checks of the CUDA backend in one command, for a lent GPU machine (the `device`
# tool): there Python, torch and CuPy are preinstalled and nothing can be downloaded, so
# this uses them as they are (no venv) with the repository on PYTHONPATH.
#   bash scripts/gpu-check.sh            # results also copied to $OUT when it is set
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
python - <<'PY'
import cupy, torch
print("torch", torch.__version__, "cuda", torch.cuda.is_available(), "| cupy", cupy.__version__,
      "devices", cupy.cuda.runtime.getDeviceCount())
PY
python -m pytest -q -m gpu tests/cuda -p no:cacheprovider -o addopts="" 2>&1 | tail -25
python benchmarks/repops_cuda.py --sizes 1024 2048 4096 8192
if [ -n "${OUT:-}" ]; then cp benchmarks/results/repops_cuda.json benchmarks/results/repops_cuda.png "$OUT"/; fi
