#!/usr/bin/env bash
# README command 1: the main Verde job end to end on the embedded defaults.
# Extra arguments go to `verde demo` (e.g. --chain anvil).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
exec "$VENV/bin/verde" demo "$@"
