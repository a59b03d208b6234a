"""Chunk trees of tensor bytes (docs/PROTOCOL.md §2-3) at memory speed: every leaf and inner
node of a tensor's chunk tree in ONE C call (native/chunktree.c over OpenSSL's SHA-256) that
releases the GIL and runs on every core, instead of one hashlib call per 1 KB chunk (~5x
slower a core, and one core). The bytes are the pure-Python tree's (merkle.Tree), node for node:
tests/protocol/test_chunktree.py compares them.

SHA-256 runs on the CPU's SHA extensions where it has them (no per-hash API call), else on
OpenSSL. The C path needs gcc (RepOps' CPU kernels need it too, and share its build cache:
repops/cpu/build.py) and the libcrypto that Python's hashlib loads. Without either, commitments
fall back to the pure-Python tree with one warning: the same roots, about 5x slower a core.
Threads: VERDE_COMMIT_THREADS, else every CPU this process may use.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import warnings
from pathlib import Path

import numpy as np

from . import merkle

SOURCE = Path(__file__).parent / "native" / "chunktree.c"
FLAGS = ["-O2", "-std=gnu11", "-fPIC", "-shared", "-pthread", "-Wall", "-Werror"]

_lib = None
_why_not: str | None = None


def threads() -> int:
    env = os.environ.get("VERDE_COMMIT_THREADS")
    return max(1, int(env)) if env else len(os.sched_getaffinity(0))


def _libcrypto() -> str | None:
    """The libcrypto file hashlib runs on (so the C path hashes with the same OpenSSL)."""
    import _hashlib  # noqa: F401  (loads it)
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1]
                if "/libcrypto.so" in path and Path(path).exists():
                    return path
    except OSError:
        pass
    return ctypes.util.find_library("crypto")


def lib():
    """The C chunk-tree library, or None (with one warning saying why) where it cannot be built."""
    global _lib, _why_not
    if _lib is None and _why_not is None:
        try:
            from repops.cpu.build import cached_library
            crypto = _libcrypto()
            if crypto is None:
                raise OSError("no libcrypto found (Python's hashlib is not linked to a shared OpenSSL)")
            L = ctypes.CDLL(str(cached_library("verde-chunktree", [SOURCE], FLAGS, (crypto,))))
            L.verde_tree_nodes.argtypes = [ctypes.c_uint64, ctypes.c_uint64]
            L.verde_tree_nodes.restype = ctypes.c_uint64
            L.verde_chunk_tree.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_void_p, ctypes.c_int,
                                           ctypes.c_uint64]
            L.verde_chunk_tree.restype = ctypes.c_int
            L.verde_sha_impl.argtypes = [ctypes.c_int]
            L.verde_sha_impl.restype = ctypes.c_int
            _lib = L
        except Exception as e:  # noqa: BLE001  (any reason: the Python tree gives the same bytes)
            _why_not = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            warnings.warn(f"tensor commitments use the pure-Python chunk tree (same roots, ~5x slower a core): "
                          f"the C chunk tree is unavailable ({_why_not})", RuntimeWarning, stacklevel=2)
    return _lib


def compression(force: str | None = None) -> str:
    """Which SHA-256 compression the C path runs: "sha-ni" (the CPU's SHA extensions) or
    "openssl"; force picks one (tests run both; "sha-ni" falls back where the CPU lacks it),
    "auto" the CPU's choice again."""
    L = lib()
    if L is None:
        return "python"
    return ("openssl", "sha-ni")[L.verde_sha_impl({None: -1, "auto": -2, "openssl": 0, "sha-ni": 1}[force])]


def nodes_python(raw: bytes, csize: int) -> bytes:
    """The reference: merkle.Tree's levels over leaf_hash of each chunk, concatenated."""
    leaves = [merkle.leaf_hash(raw[i:i + csize]) for i in range(0, len(raw), csize)]
    return b"".join(b"".join(level) for level in merkle._levels(leaves))


def nodes(array: np.ndarray, csize: int, nthreads: int | None = None, min_bytes: int = 1 << 20) -> bytes:
    """Every node of the chunk tree of a C-contiguous array's bytes cut into csize-byte chunks:
    levels leaves first (padded with ZERO to a power of two), 32 bytes each (merkle.Tree.from_nodes
    reads them back). A thread for each min_bytes at most (tests lower it to split small trees)."""
    if csize < 1:
        raise ValueError(f"chunk of {csize} bytes: a chunk holds at least one byte")
    if not array.flags.c_contiguous:
        raise ValueError("chunk trees are over C-contiguous arrays (tensors.canonical makes one)")
    L = lib()
    if L is None:
        return nodes_python(array.tobytes(), csize)
    out = ctypes.create_string_buffer(32 * L.verde_tree_nodes(array.nbytes, csize))
    L.verde_chunk_tree(array.ctypes.data, array.nbytes, csize, out, nthreads or threads(), max(1, min_bytes))
    return out.raw
