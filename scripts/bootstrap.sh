#!/usr/bin/env bash
# Idempotent set-up shared by the two README commands: Python venv from the lock, npm
# packages from package-lock.json, and the solcjs shim registered as solc for py-solc-x,
# ape-solidity and forge. Each step is skipped when its stamp says it is up to date.
#
# Source it (`. scripts/bootstrap.sh`) to get VERDE_ROOT, VENV, PATH and SOLCX_BINARY_PATH
# exported; run it to just set up.
set -euo pipefail

VERDE_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${VERDE_VENV:-$VERDE_ROOT/.venv}"
PYTHON="${VERDE_PYTHON:-python3.11}"
SOLC_VERSION="0.8.37"
UV_VERSION="0.13.9"

say() { printf '[bootstrap] %s\n' "$*" >&2; }
die() { printf '[bootstrap] ERROR: %s\n' "$*" >&2; exit 1; }
stamp_of() { cat "$@" | sha256sum | cut -c1-64; }

need() {  # need CMD WHAT FIX
  command -v "$1" >/dev/null 2>&1 || die "$2 not found on PATH ($1). Fix: $3"
}

pip_index_args() {  # pip's index settings (its config files, PIP_* variables) as uv options: uv reads neither
  "$VENV/bin/pip" config list 2>/dev/null | while IFS='=' read -r key value; do
    value="${value#\'}"; value="${value%\'}"
    case "$key" in
      *.find-links) for v in $value; do echo "--find-links=$v"; done ;;
      *.extra-index-url) for v in $value; do echo "--extra-index-url=$v"; done ;;
      *.index-url) echo "--index-url=$value" ;;
    esac
  done | sort -u
}

install_lock() {
  # uv installs the lock in ~20 s, pip in ~2 min (it compiles every module's bytecode on one core;
  # here Python compiles what it imports, once: see PYTHONDONTWRITEBYTECODE below). pip is the
  # fallback whenever uv cannot be had or cannot install.
  local lock="$VERDE_ROOT/requirements.lock" args
  if "$VENV/bin/pip" install --quiet --disable-pip-version-check "uv==$UV_VERSION" 2>/dev/null; then
    mapfile -t args < <(pip_index_args)
    if "$VENV/bin/uv" pip install --quiet --no-cache --no-deps --index-strategy unsafe-best-match \
        --python "$VENV/bin/python" "${args[@]}" -r "$lock"; then
      return 0
    fi
    say "uv could not install requirements.lock (above); pip instead"
  fi
  "$VENV/bin/pip" install --quiet --disable-pip-version-check --no-deps -r "$lock" 2> >(grep -v "^WARNING: Location" >&2)
}

setup_python() {
  need "$PYTHON" "Python 3.11" "install Python 3.11 or set VERDE_PYTHON=/path/to/python3.11"
  local want; want="$(stamp_of "$VERDE_ROOT/requirements.lock" "$VERDE_ROOT/pyproject.toml")"
  if [ -x "$VENV/bin/python" ] && [ "$(cat "$VENV/.verde-stamp" 2>/dev/null)" = "$want" ]; then
    say "Python venv up to date ($VENV)"
    return
  fi
  if [ ! -x "$VENV/bin/python" ]; then
    say "creating Python venv at $VENV"
    "$PYTHON" -m venv "$VENV" || die "could not create a venv with $PYTHON. Fix: install the venv module (Debian: python3.11-venv)"
  fi
  say "installing pinned Python packages from requirements.lock (no resolver; first time ~30 s with uv, ~2 min with pip)"
  if ! install_lock; then
    die "neither uv nor pip could install requirements.lock. If pip says it cannot reach the index, the PyPI registry is unreachable: check the network/proxy and run again (nothing is lost; finished packages are kept)."
  fi
  say "installing the verde packages (repops, offchain) in editable mode"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check --no-deps --no-build-isolation \
      -e "$VERDE_ROOT" 2> >(grep -v "^WARNING: Location" >&2) \
    || die "editable install of $VERDE_ROOT failed (see above)"
  echo "$want" > "$VENV/.verde-stamp"
}

setup_node() {
  need node "Node.js" "install Node.js >= 18 (Debian: apt-get install nodejs npm)"
  need npm "npm" "install npm (Debian: apt-get install npm)"
  local want; want="$(stamp_of "$VERDE_ROOT/package-lock.json")"
  if [ -d "$VERDE_ROOT/node_modules" ] && [ "$(cat "$VERDE_ROOT/node_modules/.verde-stamp" 2>/dev/null)" = "$want" ]; then
    say "npm packages up to date (solc, anvil, forge)"
    return
  fi
  say "installing npm packages from package-lock.json (solc $SOLC_VERSION, @foundry-rs/anvil, @foundry-rs/forge)"
  if ! (cd "$VERDE_ROOT" && npm ci --no-audit --no-fund --loglevel=error >/dev/null 2>"$VERDE_ROOT/.npm-ci.log"); then
    tail -5 "$VERDE_ROOT/.npm-ci.log" >&2 || true
    if grep -qiE "ENOTFOUND|ECONNREFUSED|ETIMEDOUT|EAI_AGAIN|network" "$VERDE_ROOT/.npm-ci.log"; then
      die "npm could not reach its registry. Fix: check the network or npm proxy/registry config, then run again."
    fi
    die "npm ci failed (log above, full log in .npm-ci.log)."
  fi
  rm -f "$VERDE_ROOT/.npm-ci.log"
  echo "$want" > "$VERDE_ROOT/node_modules/.verde-stamp"
}

register_solc() {
  # py-solc-x and ape-solidity look for solc-v<version> in SOLCX_BINARY_PATH; a copy of the
  # node script cannot find node_modules, so the registered file is a wrapper that execs it.
  export SOLCX_BINARY_PATH="$VENV/solcx"
  local exe="$SOLCX_BINARY_PATH/solc-v$SOLC_VERSION"
  local body="#!/bin/sh
exec node \"$VERDE_ROOT/scripts/solc.cjs\" \"\$@\""
  if [ "$(cat "$exe" 2>/dev/null)" != "$body" ]; then
    say "registering the solcjs shim as solc $SOLC_VERSION ($exe)"
    mkdir -p "$SOLCX_BINARY_PATH"
    printf '%s\n' "$body" > "$exe"
    chmod +x "$exe"
  fi
  "$exe" --version | grep -q "Version: $SOLC_VERSION" \
    || die "the solc shim does not answer --version with $SOLC_VERSION. Fix: rm -rf node_modules and run again."
  export FOUNDRY_SOLC="$exe"
}

check_disk() {
  # A full disk fails every test at once with errors that name anything but the disk (CI of
  # e2f1958: 767 s of errors; Anvil's leftover states had filled it). The install is ~1.8 GB,
  # a suite run writes ~0.5 GB more (C and CUDA libraries, pytest's temp dirs).
  local need_mb=$(( ${VERDE_MIN_FREE_GB:-2} * 1024 )) dir free
  for dir in "$VERDE_ROOT" "${TMPDIR:-/tmp}"; do
    free=$(df -Pm "$dir" | awk 'NR == 2 {print $4}')
    if [ -n "$free" ] && [ "$free" -lt "$need_mb" ]; then
      local old="${HOME:-}/.foundry/anvil/tmp"
      die "only $free MB free on the disk of $dir; the install and a test run need $need_mb MB. Fix: free some space$( \
        [ -d "$old" ] && echo " (Anvil's leftover states: $(du -sh "$old" 2>/dev/null | cut -f1) in $old, safe to delete when no Anvil runs)")."
    fi
  done
}

check_disk
# npm's install and pip's run side by side (each is mostly one core waiting on the network or
# unpacking); either one's failure stops the script with its own message
setup_node &
node_pid=$!
trap 'kill "$node_pid" 2>/dev/null || true' EXIT  # a failed pip step stops npm too (its stamp unwritten)
setup_python
wait "$node_pid" || exit 1  # (its own message is printed)
trap - EXIT
register_solc
# The venv's modules are compiled to bytecode on their first import (uv installs none), so a
# machine-wide PYTHONDONTWRITEBYTECODE would make every process compile torch again (~4 s each)
unset PYTHONDONTWRITEBYTECODE
export VERDE_ROOT VENV PATH="$VENV/bin:$VERDE_ROOT/node_modules/@foundry-rs/anvil-linux-amd64/bin:$VERDE_ROOT/node_modules/@foundry-rs/forge-linux-amd64/bin:$PATH"
