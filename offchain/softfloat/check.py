"""Differential checking of the binary32 primitives: operand generators (TestFloat-style
edge set + random patterns) and the reference per primitive: the RepOps numpy kernels
(hardware float32; binary64 round-to-odd for fma), adapted to uint32 words, plus an exact
rational fma as a second, independent reference.

One table drives the CI tests, the soak command and the gas benchmark.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from repops.reference import prims as P

from . import float32 as sf

_EDGE_POSITIVE = [
    0x00000000,              # +0
    0x00000001, 0x00000002,  # smallest subnormals
    0x00400000,              # mid subnormal
    0x007FFFFF,              # largest subnormal
    0x00800000, 0x00800001,  # smallest normals
    0x01000000,
    0x33800000, 0x34000000,  # 2^-24, 2^-23: half-ulp and ulp of 1
    0x3EFFFFFF, 0x3F000000, 0x3F000001,  # around 0.5 (rint ties)
    0x3F7FFFFF, 0x3F800000, 0x3F800001,  # 1 and neighbours
    0x3FC00000, 0x40000000, 0x40200000, 0x40400000,  # 1.5, 2, 2.5, 3
    0x4AFFFFFF, 0x4B000000, 0x4B000001, 0x4B7FFFFF, 0x4B800000,  # 2^23 .. 2^24 (integral limit)
    0x4EFFFFFF, 0x4F000000, 0x4F000001,  # around 2^31 (int32 limit)
    0x5F000000,
    0x7E800000, 0x7F000000, 0x7F7FFFFE, 0x7F7FFFFF,  # overflow boundary
    0x7F800000,              # +inf
    0x7FC00000, 0x7F800001, 0x7FFFFFFF,  # NaNs (quiet, signalling, max payload)
]
EDGE = sorted({x | s for x in _EDGE_POSITIVE for s in (0, 0x80000000)})


def _f(u):
    return np.asarray(u, dtype=np.uint32).view(np.float32)


def _u(f):
    return np.asarray(f, dtype=np.float32).view(np.uint32)


def _exact_round(x: Fraction) -> int:
    """Round a rational to binary32 independently of softfloat.round_pack: find the
    binade by comparison, round the scaled value with Python's ties-to-even round(),
    and let numpy place the (exactly representable) result."""
    if x == 0:
        return 0
    sign = 0x80000000 if x < 0 else 0
    ax = abs(x)
    e = ax.numerator.bit_length() - ax.denominator.bit_length()
    while Fraction(2) ** e > ax:
        e -= 1
    while Fraction(2) ** (e + 1) <= ax:
        e += 1
    lsb = max(e - 23, -149)
    q = round(ax / Fraction(2) ** lsb)          # Python rounds a Fraction ties-to-even
    if q * Fraction(2) ** lsb >= Fraction(2) ** 128:
        return 0x7F800000 | sign                 # overflow
    return int(_u(np.float32(float(q) * 2.0 ** lsb))) | sign  # exact: q <= 2^24


def _fraction(u: int) -> Fraction:
    s, m, e = sf.unpack(u)
    v = Fraction(m) * Fraction(2) ** e
    return -v if s else v


def fma_exact(a: int, b: int, c: int) -> int:
    """fma from exact rationals; specials from the IEEE rules via numpy's a*b+c on the
    non-finite cases, zero signs as IEEE 754 §6.3 states them."""
    fa, fb, fc = (float(_f(x)) for x in (a, b, c))
    if not all(np.isfinite([fa, fb, fc])):
        with np.errstate(all="ignore"):
            r = np.float32(fa * fb + fc)  # no rounding happens: inf/NaN only
        return 0x7FC00000 if np.isnan(r) else int(_u(r))  # NUMERICS.md §2: canonical NaN
    x = _fraction(a) * _fraction(b) + _fraction(c)
    if x == 0:
        psign = (a ^ b) >> 31
        both_zero = (sf.is_zero(a) or sf.is_zero(b)) and sf.is_zero(c)
        return 0x80000000 if (both_zero and psign and c >> 31) else 0
    return _exact_round(x)


def from_words(name: str, i: int, w) -> np.ndarray:
    """Operand i of a primitive, from the table's uint32 words to the array RepOps takes."""
    w = np.asarray(w, np.uint32)
    if name == "select" and i == 0:
        return w != 0
    return w.view(np.int32) if (name, i) in sf.INT32_OPERANDS else w.view(np.float32)


def to_words(x) -> np.ndarray:
    """A RepOps array (float32, int32 or bool) as the table's uint32 words."""
    x = np.asarray(x)
    if x.dtype == bool:
        return x.astype(np.uint32)
    return x.astype(np.int32 if x.dtype.kind in "iu" else np.float32).view(np.uint32)


def _word_reference(name: str):
    """The RepOps reference kernel of a primitive, on uint32 words (the table's encoding)."""
    fn, arity = P.PRIMS[name], sf.PRIMITIVES[name][1]

    def ref(a, b, c):
        return to_words(fn(*(from_words(name, i, w) for i, w in enumerate((a, b, c)[:arity]))))
    return ref


REFERENCE = {name: _word_reference(name) for name in sf.PRIMITIVES}
assert set(P.PRIMS) == set(sf.PRIMITIVES), "RepOps and the soft-float must share one primitive table"


def operands(name: str, n: int, rng: np.random.Generator, edges: bool = True):
    """(a, b, c) uint32 arrays: the edge cross product (when edges) then random patterns,
    half of them with exponents matched so additions interact and cancel."""
    arity = sf.PRIMITIVES[name][1]
    cols = []
    if edges:
        e = np.array(EDGE, dtype=np.uint32)
        grids = np.meshgrid(*([e] * min(arity, 2)), indexing="ij")
        cols = [g.ravel() for g in grids]
        if arity == 3:  # edge pairs against a random third operand
            cols.append(rng.integers(0, 2**32, cols[0].size, dtype=np.uint64).astype(np.uint32))
    r = [rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32) for _ in range(3)]
    half = np.arange(n) % 2 == 1
    if name == "fma":  # c near a*b's exponent: the interesting cancellations
        ea, eb = (r[0] >> 23) & 0xFF, (r[1] >> 23) & 0xFF
        ec = (ea.astype(np.int64) + eb - 127 + rng.integers(-30, 30, n)).clip(0, 254).astype(np.uint32)
        r[2] = np.where(half, (r[2] & 0x807FFFFF) | (ec << 23), r[2])
    else:
        r[1] = np.where(half, (r[1] & 0x807FFFFF) | (r[0] & 0x7F800000), r[1])
    if name == "ldexp":
        r[1] = rng.integers(-320, 320, n).astype(np.int32).view(np.uint32)
    if name == "select":
        r[0] = rng.integers(0, 2, n, dtype=np.uint32)
    out = []
    for i in range(3):
        parts = ([cols[i]] if i < len(cols) else [np.zeros(cols[0].size, np.uint32)] if cols else []) + [r[i]]
        out.append(np.concatenate(parts).astype(np.uint32))
    return tuple(out)


def sample(name: str, n: int, rng: np.random.Generator):
    """n vectors: up to half drawn from the edge set's combinations, the rest random."""
    n_random = n - n // 2
    a, b, c = operands(name, n_random, rng)
    n_edge = len(a) - n_random
    pick = np.concatenate([rng.choice(n_edge, min(n_edge, n // 2), replace=False), np.arange(n_edge, len(a))])
    return a[pick], b[pick], c[pick]


def mismatches(name: str, got, want):
    """Mask of lanes whose bits differ (both sides canonicalise NaN, so bits must agree)."""
    return np.asarray(got, np.uint32) != np.asarray(want, np.uint32)


def softfloat_results(name: str, a, b, c) -> np.ndarray:
    _, arity, fn = sf.PRIMITIVES[name]
    args = [x.tolist() for x in (a, b, c)[:arity]]
    return np.fromiter((fn(*t) for t in zip(*args)), dtype=np.uint32, count=len(a))


# -- vectors for the Solidity tests ----------------------------------------------------------
VECTOR_FORMAT = "records of 5 big-endian uint32: opcode, a, b, c, result (Python soft-float)"


def make_vectors(per_op: int = 150, seed: int = 2026) -> bytes:
    """Half edge-set combinations, half random patterns, per primitive."""
    rng = np.random.default_rng(seed)
    out = bytearray()
    for name in sorted(sf.PRIMITIVES, key=lambda k: sf.PRIMITIVES[k][0]):
        code, arity, _ = sf.PRIMITIVES[name]
        a, b, c = sample(name, per_op, rng)
        r = softfloat_results(name, a, b, c)
        for rec in zip([code] * len(a), a.tolist(), b.tolist(), c.tolist(), r.tolist()):
            out += b"".join(int(v).to_bytes(4, "big") for v in rec)
    return bytes(out)


def vectors_json(per_op: int = 150, seed: int = 2026) -> str:
    import json
    blob = make_vectors(per_op, seed)
    return json.dumps({"format": VECTOR_FORMAT, "count": len(blob) // 20, "per_op": per_op, "seed": seed,
                       "vectors": "0x" + blob.hex()}, indent=1) + "\n"


if __name__ == "__main__":  # python -m offchain.softfloat.check > tests/vectors/float32.json
    import sys
    sys.stdout.write(vectors_json())
