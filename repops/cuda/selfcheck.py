"""Canaries a CUDA runtime must pass before RepOps computes anything on it.

Each canary runs the runtime's real kernels through the same launch glue as training
(repops/cuda/ops.py) on values where broken numerics show: subnormal operands and results
(a kernel built with -ftz=true flushes them), -0.0 as a broadcast scalar and as a fold's
initial value (a value-based transfer turns it into +0.0), x / -0 (-inf, not +inf), an
underflowing dot product. The reference (numpy on the host) gives the wanted bits; any
difference is a BackendError naming the canary and both bit patterns, so a trainer never
stakes on a device that would compute other bits than everyone else."""
from __future__ import annotations

import numpy as np

from ..errors import BackendError
from ..reference import linalg as RL
from ..reference import math as M
from ..reference import prims as P
from ..reference.fold import fold as ref_fold

F32 = np.float32
TINY = np.uint32([1, 0x00400001, 0x007FFFFF, 0x80000003]).view(F32)   # subnormals, one negative
NZ, PZ = F32(-0.0), F32(0.0)


def _pow2(e: int) -> F32:
    return F32(np.ldexp(np.float64(1.0), e))


def canaries():
    """(label, kernel name, operands, the reference function)."""
    x = np.array([1.5, -2.0, 0.0, -0.0, 3e-39, 7.0], F32)
    v = np.full(6, _pow2(-70), F32)
    return [
        ("subnormal + subnormal", "add", (TINY, TINY[::-1].copy()), P.add.reference),
        ("1e-45 * 1", "mul", (TINY[:1], np.ones(1, F32)), P.mul.reference),
        ("2^-70 * 2^-70 (subnormal product)", "mul", (v, v), P.mul.reference),
        ("2^-140 / 3", "div", (np.full(3, _pow2(-140), F32), F32(3.0)), P.div.reference),
        ("x / -0 (broadcast scalar)", "div", (x, NZ), P.div.reference),
        ("sqrt(subnormal)", "sqrt", (np.abs(TINY),), P.sqrt.reference),
        ("fma(2^-70, 2^-70, subnormal)", "fma", (v[:4], v[:4], TINY), P.fma.reference),
        ("x + (-0) (broadcast scalar)", "add", (x, NZ), P.add.reference),
        ("-0 + -0", "add", (np.full(2, NZ), NZ), P.add.reference),
        ("x * (-0) (broadcast scalar)", "mul", (x, NZ), P.mul.reference),
        ("min(x, -0)", "min", (x, NZ), P.min_.reference),
        ("max(-0, +0)", "max", (np.full(3, NZ), PZ), P.max_.reference),
        ("select(c, -0, x)", "select", (np.array([1, 0, 1, 0, 1, 0], bool), NZ, x), P.select.reference),
        ("ldexp(1, -140)", "ldexp", (np.ones(2, F32), np.int32(-140)), P.ldexp.reference),
        ("exp to a subnormal", "exp", (np.array([-100.0, -103.0, -0.0], F32),), M.exp.reference),
        ("underflowing dot product", "matmul", (np.full((2, 5), _pow2(-75), F32), np.full((5, 3), _pow2(-74), F32)),
         RL.matmul.reference),
        ("sum of [-0] from init -0", "fold", (P.add, np.full((2, 1), NZ), 1, NZ), ref_fold.reference),
        ("empty sum from init -0", "fold", (P.add, np.zeros((3, 0), F32), 1, NZ), ref_fold.reference),
        ("sum of subnormals", "fold", (P.add, np.tile(TINY, (2, 1)), 1, NZ), ref_fold.reference),
        ("gather with fill -0", "gather", (np.ones((1, 2, 2), F32), np.array([[0, 5]], np.int64), NZ), P.gather.reference),
        ("onehot with value -0", "onehot", (np.array([1, 0], np.int64), np.full(2, NZ), np.full(3, PZ)),
         P.onehot.reference),
    ]


def _bits(a) -> np.ndarray:
    a = np.asarray(a)
    return a.view(np.uint32) if a.dtype == F32 else a


def selfcheck(rt, table: dict) -> None:
    """Raise BackendError on the first canary whose bits differ from the reference."""
    for label, name, args, ref in canaries():
        want = np.asarray(ref(*args))
        try:
            got = rt.download(table[name](*args))
        except Exception as e:  # a kernel that does not even run is refused as well
            raise BackendError(f"{rt.name} self-check: {label} ({name}) raised {type(e).__name__}: {e}") from e
        got = np.asarray(got)
        if got.shape != want.shape or got.dtype != want.dtype or not np.array_equal(_bits(got), _bits(want)):
            gb, wb = _bits(got).reshape(-1), _bits(want).reshape(-1)
            i = next((i for i in range(min(gb.size, wb.size)) if gb[i] != wb[i]), 0)
            g, w = (f"0x{int(b[i]):08X}" if b.size > i else "nothing" for b in (gb, wb))
            raise BackendError(
                f"{rt.name} self-check failed on {label} ({name}): element {i} is {g}, the reference gives {w} "
                f"(shapes {got.shape} / {want.shape}). This device or its compile path does not compute RepOps' "
                "bits (flushed subnormals or a lost -0.0), so RepOps refuses to run on it: "
                "see docs/NUMERICS.md §9.")
