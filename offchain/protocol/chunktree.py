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
import functools
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
            L.verde_chunk_trees.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint64,
                                            ctypes.c_void_p, ctypes.c_int]
            L.verde_chunk_trees.restype = ctypes.c_int
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


MIN_BYTES = 1 << 20  # a tree's bytes per thread at least (starting a thread costs ~0.05 ms)


def _check(arrays, csize: int) -> None:
    if csize < 1:
        raise ValueError(f"chunk of {csize} bytes: a chunk holds at least one byte")
    if not all(a.flags.c_contiguous for a in arrays):
        raise ValueError("chunk trees are over C-contiguous arrays (tensors.canonical makes one)")


def nodes(array: np.ndarray, csize: int, nthreads: int | None = None, min_bytes: int = MIN_BYTES) -> bytes:
    """Every node of the chunk tree of a C-contiguous array's bytes cut into csize-byte chunks:
    levels leaves first (padded with ZERO to a power of two), 32 bytes each (merkle.Tree.from_nodes
    reads them back). A thread for each min_bytes at most (tests lower it to split small trees)."""
    _check((array,), csize)
    L = lib()
    if L is None:
        return nodes_python(array.tobytes(), csize)
    out = ctypes.create_string_buffer(32 * L.verde_tree_nodes(array.nbytes, csize))
    L.verde_chunk_tree(array.ctypes.data, array.nbytes, csize, out, nthreads or threads(), max(1, min_bytes))
    return out.raw


def nodes_many(arrays: list, csize: int, nthreads: int | None = None) -> list[bytes]:
    """nodes() of each array, in one call: the arrays shared out among the threads (each tree
    on one thread), for many small ones whose per-call cost and single thread dominate."""
    _check(arrays, csize)
    L = lib()
    if L is None or len(arrays) < 2:
        return [nodes(a, csize, nthreads) for a in arrays]
    outs = [ctypes.create_string_buffer(32 * L.verde_tree_nodes(a.nbytes, csize)) for a in arrays]
    order = sorted(range(len(arrays)), key=lambda i: -arrays[i].nbytes)  # largest first: the threads end together
    ptr = ctypes.c_void_p * len(arrays)
    L.verde_chunk_trees(len(arrays), ptr(*(arrays[i].ctypes.data for i in order)),
                        (ctypes.c_uint64 * len(arrays))(*(arrays[i].nbytes for i in order)), csize,
                        ptr(*(ctypes.addressof(outs[i]) for i in order)), nthreads or threads())
    return [o.raw for o in outs]


# levels of the tree a launch hashes above the leaves (sha256.cu's sha256_subtrees: a block of
# 2^(SUBTREE_LEVELS - 1) <= RP_SHA_SUBTREE threads): a 64 MB tensor's tree is 3 launches, not 17
SUBTREE_LEVELS = 9


def tree_on_device(rt, data, csize: int):
    """nodes() of a device array's bytes, hashed where they live (repops/cuda/kernels/sha256.cu
    on rt: the GPU's runtime, or the CPU emulator in CI), left on the device: a uint8 device
    array of every node, leaves first, the top its last 32 bytes. Launches only: nothing is
    read, so a traced step hashes on without waiting (tensors.read_tops reads many tops at
    once). data: a C-contiguous uint8 device array."""
    if csize < 1:
        raise ValueError(f"chunk of {csize} bytes: a chunk holds at least one byte")
    nbytes = int(data.size)
    n = -(-nbytes // csize)
    padded = 1 << merkle.depth(n) if n else 1
    from repops.cuda.ops import Ops
    grid = Ops(rt)._grid  # (grid-stride kernels: any geometry, the same bytes)
    out = rt.empty((32 * (2 * padded - 1),), np.uint8)  # every level, leaves first (nodes()'s layout)
    rt.launch("sha256_leaves", *grid(padded), data, nbytes, csize, padded, out[:32 * padded])
    at, width = 0, padded
    while width > 1:  # SUBTREE_LEVELS levels a launch, a block a subtree
        levels = min(SUBTREE_LEVELS, width.bit_length() - 1)
        rt.launch("sha256_subtrees", (min(width >> levels, rt.max_blocks), 1, 1), (1 << (levels - 1), 1, 1),
                  out[32 * at:], width, levels, out[32 * (at + width):])
        at, width = at + 2 * width - (width >> (levels - 1)), width >> levels
    return out


def nodes_on_device(rt, data, csize: int, top_only: bool = False) -> bytes:
    """tree_on_device, read: the host downloads the tree's 32-byte nodes (top_only: the top
    one), never the tensor."""
    out = tree_on_device(rt, data, csize)
    return rt.download(out[-32:] if top_only else out).tobytes()


# message lengths (chunk + its prefix byte) on both sides of SHA-256's padding boundaries, a
# last chunk shorter than the others, a level that needs ZERO padding: what a device's tree
# must match the host's on before it commits anything
SELF_CHECK = ((0, 4), (1, 1), (54, 54), (55, 55), (56, 56), (63, 63), (64, 64), (119, 119), (120, 120),
              (1000, 7), (4097, 1024), (3 * 4096 + 12, 256))
# a CUDA tensor this big or more is hashed on its GPU (a tree is a launch a level and a sync;
# below, its download and the host's tree cost less): VERDE_COMMIT_DEVICE_MIN_BYTES overrides
DEVICE_MIN_BYTES = int(os.environ.get("VERDE_COMMIT_DEVICE_MIN_BYTES", 1 << 18))


def device_runtime():
    """The GPU's runtime for hashing CUDA tensors where they live, once its chunk trees matched
    the host's on SELF_CHECK (else None, with one warning: tensors are then hashed on the host,
    the same roots, after a download). VERDE_COMMIT_ON_DEVICE=0 turns it off."""
    return None if os.environ.get("VERDE_COMMIT_ON_DEVICE", "1") == "0" else _checked_device()


@functools.cache
def _checked_device():
    """(decided once a process)"""
    try:
        from repops.cuda.device import device
        rt = device()
        mismatch = self_check(rt)
    except Exception as e:  # noqa: BLE001 - no CuPy, no device, a build error: hash on the host
        warnings.warn(f"chunk trees on the GPU unavailable ({type(e).__name__}: {e}); CUDA tensors are "
                      "committed on the host", RuntimeWarning, stacklevel=3)
        return None
    if mismatch:
        warnings.warn(f"the GPU's chunk tree differs from the host's for {mismatch} (bytes, chunk); CUDA "
                      "tensors are committed on the host", RuntimeWarning, stacklevel=3)
        return None
    return rt


def self_check(rt) -> tuple | None:
    """The first SELF_CHECK case whose tree rt hashes differently from nodes() (None: all agree)."""
    rng = np.random.default_rng(2024)
    for nbytes, csize in SELF_CHECK:
        host = rng.integers(0, 256, nbytes, dtype=np.uint8)
        if nodes_on_device(rt, rt.upload(host), csize) != nodes(host, csize):
            return nbytes, csize
    return None
