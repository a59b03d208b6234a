"""The binary32 primitives of docs/NUMERICS.md as numpy kernels: THE reference.

Each map primitive is one IEEE operation per element (numpy float32 on the host, which
never flushes subnormals), followed by the spec's rules that hardware leaves open: NaN
results are canonical 0x7FC00000, max/min order -0 < +0, float->int conversions saturate.
fma, which numpy lacks, is binary64 round-to-odd (exact; see NUMERICS.md §6). The names
and meaning are those of offchain.softfloat.PRIMITIVES, so every reference step is one
opcode the referee can re-execute.
"""
from __future__ import annotations

import numpy as np

F32 = np.float32
CANONICAL_NAN = np.uint32(0x7FC00000).view(np.float32)


def canon(x: np.ndarray) -> np.ndarray:
    """Replace every NaN by the canonical one (bit pattern 0x7FC00000)."""
    x = np.asarray(x, dtype=F32)
    return np.where(np.isnan(x), CANONICAL_NAN, x).astype(F32)


def _map(f):
    def prim(*args):
        with np.errstate(all="ignore"):
            return canon(f(*(np.asarray(a, dtype=F32) for a in args)))
    prim.__name__ = f.__name__
    return prim


def _bits(x):
    return np.asarray(x, dtype=F32).view(np.uint32)


def _fma(a, b, c):
    x, y, z = (v.astype(np.float64) for v in (a, b, c))
    p = x * y                                   # exact: 24 + 24 bits < 53
    s = p + z
    bb = s - p
    err = (p - (s - bb)) + (z - bb)             # TwoSum: s + err == p + z exactly
    bits = s.view(np.uint64)
    nudge = np.isfinite(s) & (err != 0) & ((bits & 1) == 0)
    away = (err > 0) == (s > 0)                 # toward the exact value
    bits = np.where(nudge, np.where(away, bits + 1, bits - 1), bits)
    return bits.view(np.float64).astype(F32)    # round-to-odd then RNE: correct


def _maximum(a, b):
    both_zero = (a == 0) & (b == 0)
    return np.where(both_zero, (_bits(a) & _bits(b)).view(F32), np.maximum(a, b))


def _minimum(a, b):
    both_zero = (a == 0) & (b == 0)
    return np.where(both_zero, (_bits(a) | _bits(b)).view(F32), np.minimum(a, b))


def _to_int32(rounder):
    def conv(a):
        with np.errstate(all="ignore"):
            r = rounder(np.asarray(a, dtype=F32)).astype(np.float64)
        r = np.nan_to_num(r, nan=0.0, posinf=2.0**31, neginf=-(2.0**31))
        return np.clip(r, -(2.0**31), 2.0**31 - 1).astype(np.int32)
    return conv


add = _map(np.add)
sub = _map(np.subtract)
mul = _map(np.multiply)
fma = _map(_fma)
div = _map(np.divide)
sqrt = _map(np.sqrt)
neg = _map(np.negative)
abs_ = _map(np.abs)
max_ = _map(_maximum)
min_ = _map(_minimum)
rint = _map(np.rint)
floor = _map(np.floor)
trunc = _map(np.trunc)


def ldexp(a, n):
    with np.errstate(all="ignore"):
        return canon(np.ldexp(np.asarray(a, F32), np.clip(np.asarray(n, np.int64), -400, 400).astype(np.int32)))


def eq(a, b):
    return np.asarray(a, F32) == np.asarray(b, F32)


def lt(a, b):
    return np.asarray(a, F32) < np.asarray(b, F32)


def le(a, b):
    return np.asarray(a, F32) <= np.asarray(b, F32)


def select(cond, a, b):
    return canon(np.where(np.asarray(cond, bool), np.asarray(a, F32), np.asarray(b, F32)))


def from_int32(i):
    return np.asarray(i, np.int32).astype(F32)


to_int32_trunc = _to_int32(np.trunc)
to_int32_rne = _to_int32(np.rint)


def copy(a):
    return np.array(a, dtype=F32, copy=True)


# name -> reference kernel; the same names as offchain.softfloat.PRIMITIVES
PRIMS = {
    "add": add, "sub": sub, "mul": mul, "fma": fma, "div": div, "sqrt": sqrt, "neg": neg, "abs": abs_,
    "min": min_, "max": max_, "eq": eq, "lt": lt, "le": le, "select": select, "rint": rint, "floor": floor,
    "trunc": trunc, "ldexp": ldexp, "from_int32": from_int32, "to_int32_trunc": to_int32_trunc,
    "to_int32_rne": to_int32_rne, "copy": copy,
}
