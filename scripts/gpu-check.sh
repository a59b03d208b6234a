#!/usr/bin/env bash
# The GPU checks of the CUDA backend in one command, for a lent GPU machine (the `device`
# tool): there Python, torch and CuPy are preinstalled and nothing can be downloaded, so
# this uses them as they are (no venv) with the repository on PYTHONPATH.
#   bash scripts/gpu-check.sh [--sweep]   # results also copied to $OUT when it is set
# GPU_CHECK_TESTS_S / GPU_CHECK_BENCH_S bound the tests' and the benchmark's seconds (a lease is
# short: a bounded run still returns its logs, written to $OUT as they grow).
# 1. the self-check (our NVRTC path, canaries vs the CPU reference), the PTX check;
# 2. every gpu test (every kernel and every op GPU vs CPU bitwise on normal, subnormal and
#    signed-zero data, 20 AdamW steps of both models with the CPU's hash, subnormal
#    activations, a device built with -ftz=true refused, the model zoo's ops and bits and
#    every dropout path as on the CPU, a micro-batched job's root, the example jobs' claims,
#    a step replayed as a CUDA graph = eager = the CPU's claims, traced steps whose trees' tops
#    are read after the step = read at once);
# 3. benchmarks/repops_cuda.py, which records the test counts in repops_cuda.json (and where a
#    step's host time goes: host_profile); 4. benchmarks/commitments.py --device cuda.
# Exits non-zero if any test failed.
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
tmp="$(mktemp -d)"
# pydantic is not on the lent GPU machines: scripts/gpu-wheels.sh puts its wheels (and the
# example jobs) in .whl/, carried with the run; installed for this run only, after the
# machine's own packages
if [ -d .whl ]; then
    python -m pip install -q --no-index --no-deps --no-compile --target "$tmp/site" .whl/*.whl || exit 1
    export PYTHONPATH="$PYTHONPATH:$tmp/site"
fi
if [ -d .whl/jobs ]; then export VERDE_EXAMPLE_JOBS="$PWD/.whl/jobs"; fi  # built by gpu-wheels.sh
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
# xdist when the machine has it: each worker holds its own CUDA context on the one GPU
workers=$(python -c "import xdist" 2>/dev/null && echo "-n ${GPU_CHECK_WORKERS:-8}")
log="${OUT:-$tmp}/gpu.log"
timeout "${GPU_CHECK_TESTS_S:-0}" python -m pytest -q -m gpu tests/cuda tests/repops/test_kernels.py tests/repops/test_fused_ops.py \
    -p no:cacheprovider -o addopts="" $workers -rfE --durations=15 --junitxml="$tmp/gpu.xml" >"$log" 2>&1
rc=$?
tail -60 "$log"
if [ -n "${OUT:-}" ] && [ -f "$tmp/gpu.xml" ]; then cp "$tmp/gpu.xml" "$OUT"/; fi
timeout "${GPU_CHECK_BENCH_S:-0}" python benchmarks/repops_cuda.py --sizes 1024 2048 4096 8192 \
    --gpu-tests "$tmp/gpu.xml" "$@" || rc=1
# 4. a CUDA tensor's commitment on the GPU (sha256.cu) vs download + host, the same root (issue #40)
timeout 180 python benchmarks/commitments.py --device cuda --sizes-mb 1024 --reps 3 || rc=1
if [ -n "${OUT:-}" ]; then
    cp benchmarks/results/repops_cuda.json benchmarks/results/repops_cuda.png "$OUT"/
    cp benchmarks/results/commitments_gpu.json "$OUT"/ 2>/dev/null
fi
exit "$rc"
