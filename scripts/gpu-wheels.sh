#!/usr/bin/env bash
# The wheels scripts/gpu-check.sh needs that the lent GPU machines lack (pydantic, for the
# job files of the micro-batched job test), at requirements.lock's versions, for their
# Python 3.12, into .whl/ (ignored by git through .git/info/exclude; carry it with `run`).
set -euo pipefail
cd "$(dirname "$0")/.."
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo /.whl/ >> .git/info/exclude
pins=$(grep -E '^(pydantic|pydantic_core|annotated-types|typing-inspection)==' requirements.lock)
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d .whl $pins
ls .whl
