#!/usr/bin/env bash
# What scripts/gpu-check.sh needs that the lent GPU machines lack, into .whl/ (ignored by git
# through .git/info/exclude; carry it with `run`): pydantic (the job files) at
# requirements.lock's versions for their Python 3.12, and the example and program jobs built with
# the pinned torch (theirs, 2.11, cannot export our programs): tests/cuda/test_examples_gpu.py,
# tests/cuda/test_dispute_gpu.py, tests/cuda/test_graphs_gpu.py.
set -euo pipefail
cd "$(dirname "$0")/.."
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo /.whl/ >> .git/info/exclude
pins=$(grep -E '^(pydantic|pydantic_core|annotated-types|typing-inspection)==' requirements.lock)
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d .whl $pins
rm -rf .whl/jobs
PYTHONPATH="$PWD:$PWD/tests/repops" .venv/bin/python tests/cuda/test_examples_gpu.py .whl/jobs >/dev/null
PYTHONPATH="$PWD:$PWD/tests/repops" .venv/bin/python tests/cuda/test_dispute_gpu.py .whl/jobs >/dev/null
PYTHONPATH="$PWD:$PWD/tests/repops" .venv/bin/python tests/cuda/test_graphs_gpu.py .whl/jobs >/dev/null
ls .whl .whl/jobs
