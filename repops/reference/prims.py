"""The binary32 primitives of docs/NUMERICS.md as numpy kernels: THE reference.

Each map primitive is one IEEE operation per element (numpy float32 on the host, which
never flushes subnormals), followed by the spec's rules that hardware leaves open: NaN
results are canonical 0x7FC00000, max/min order -0 < +0, float->int conversions saturate.
fma, which numpy lacks, is binary64 round-to-odd (exact; see NUMERICS.md §6). The names
and meaning are those of offchain.softfloat.float32.PRIMITIVES, so every reference step is one
opcode the referee can re-execute.
"""
from __future__ import annotations

import contextlib
import contextvars
import struct

import numpy as np

F32 = np.float32
_TAPE: contextvars.ContextVar = contextvars.ContextVar("repops_tape", default=None)
# Backend overrides: primitive (or operator) name -> a compiled kernel with identical bits.
# Empty for the reference; repops.backends fills it (tests compare the two bit for bit).
_IMPLS: contextvars.ContextVar = contextvars.ContextVar("repops_impls", default={})
# While observing: map primitive name -> a compiled kernel of that one primitive with the
# reference's bits (repops.cpu's), which computes it; the observed sequence is unchanged.
_KERNELS: contextvars.ContextVar = contextvars.ContextVar("repops_prim_kernels", default={})


@contextlib.contextmanager
def implementations(table: dict):
    token = _IMPLS.set(table)
    try:
        yield
    finally:
        _IMPLS.reset(token)


@contextlib.contextmanager
def observe(callback, kernels: dict | None = None):
    """Call callback(name, operands, output) for every primitive kernel the reference
    executes, in order (the arrays themselves: views stay views). Backends are off inside:
    what is observed is the spec's sequence. Folds and matmul show one kernel per step.
    kernels: map primitive name -> a compiled kernel with the reference's bits that computes
    each such step (the same sequence and bits; a dispute's level 3 re-runs a matmul's k fma
    steps, which numpy emulates in binary64 at ~17 ns an element)."""
    token, impls, ks = _TAPE.set(callback), _IMPLS.set({}), _KERNELS.set(kernels or {})
    try:
        yield
    finally:
        _KERNELS.reset(ks)
        _IMPLS.reset(impls)
        _TAPE.reset(token)


@contextlib.contextmanager
def tape():
    """Record every primitive kernel as (name, operand copies, output copy)."""
    rec = []
    with observe(lambda name, args, out: rec.append((name, tuple(np.array(a, copy=True) for a in args),
                                                      np.array(out, copy=True)))):
        yield rec


def observing() -> bool:
    """Is a decomposition observing the kernels (observe / tape)?"""
    return _TAPE.get() is not None


def record(name, args, out):
    cb = _TAPE.get()
    if cb is not None:
        cb(name, args, out)
    return out
CANONICAL_NAN = np.uint32(0x7FC00000).view(np.float32)


def xp_of(x):
    """The array module of x: CuPy for a device array (the CUDA backend), else numpy."""
    if hasattr(x, "__cuda_array_interface__"):
        import cupy
        return cupy
    return np


_DOUBLE = struct.Struct("<d")
_CONSTS: dict = {}  # (dtype, shape, type, value's bits) -> its read-only broadcast: ops ask for the same ones each step
_CONSTS_MAX = 4096


def const(value, shape, dtype=F32) -> np.ndarray:
    """A constant operand: one value broadcast (stride 0) to `shape`. Kernels see it as a
    constant by its layout, never by comparing values (docs/PROTOCOL.md §7, descriptors).
    A Python number's is made once per value and shape (np.broadcast_to costs ~10 us; the
    view is read-only, so sharing it is safe); keyed by the number's bits, so -0.0 and each
    NaN are their own."""
    t = type(value)
    if t is float or t is int:
        key = (dtype, tuple(shape), t, _DOUBLE.pack(value) if t is float else value)
        c = _CONSTS.get(key)
        if c is None:
            if len(_CONSTS) >= _CONSTS_MAX:
                _CONSTS.clear()
            c = _CONSTS[key] = np.broadcast_to(np.asarray(value, dtype), key[1])
        return c
    return np.broadcast_to(np.asarray(value, dtype), tuple(shape))


def f32(x):
    """x as a float32 array of its own array module (a device array stays on the device)."""
    return xp_of(x).asarray(x, dtype=F32)


def canon(x: np.ndarray) -> np.ndarray:
    """Replace every NaN by the canonical one (bit pattern 0x7FC00000); no copy when there
    is no NaN (the common case)."""
    x = np.asarray(x, dtype=F32)
    nan = np.isnan(x)
    return np.where(nan, CANONICAL_NAN, x).astype(F32) if nan.any() else x


OVERRIDABLE: dict = {}  # name -> the reference function a backend may replace (tests drive every one)


def overridable(name):
    """Let a backend replace this function (an operator of the reference) by a fused kernel."""
    def deco(f):
        def run(*args, **kwargs):
            fast = _IMPLS.get().get(name)
            return (fast or f)(*args, **kwargs)
        run.__name__, run.__doc__, run.reference = f.__name__, f.__doc__, f
        OVERRIDABLE[name] = run
        return run
    return deco


MAP_PRIMITIVES: set = set()  # the names _map defines: one IEEE operation an element each


def _map(f, name):
    MAP_PRIMITIVES.add(name)

    @overridable(name)
    def prim(*args):
        xs = tuple(np.asarray(a, dtype=F32) for a in args)
        kernel = _KERNELS.get().get(name)
        if kernel is not None:
            return record(name, xs, kernel(*xs))
        with np.errstate(all="ignore"):  # row-major, as every kernel's output (numpy follows a view's layout:
            return record(name, xs, np.asarray(canon(f(*xs)), order="C"))  # a later operand is a view of it)
    prim.__name__ = name
    return prim


def _bits(x):
    return np.asarray(x, dtype=F32).view(np.uint32)


def _fma(a, b, c):
    x, y, z = (v.astype(np.float64) for v in (a, b, c))
    p = x * y                                   # exact: 24 + 24 bits < 53
    s = p + z
    bb = s - p
    err = (p - (s - bb)) + (z - bb)             # TwoSum: s + err == p + z exactly
    one = np.uint64(1)
    bits = np.asarray(s).view(np.uint64)
    nudge = np.isfinite(s) & (err != 0) & ((bits & one) == 0)
    away = (err > 0) == (s > 0)                 # toward the exact value
    bits = np.where(nudge, np.where(away, bits + one, bits - one), bits)
    return np.asarray(bits).view(np.float64).astype(F32)  # round-to-odd then RNE: correct


def _maximum(a, b):
    both_zero = (a == 0) & (b == 0)
    return np.where(both_zero, (_bits(a) & _bits(b)).view(F32), np.maximum(a, b))


def _minimum(a, b):
    both_zero = (a == 0) & (b == 0)
    return np.where(both_zero, (_bits(a) | _bits(b)).view(F32), np.minimum(a, b))


def _to_int32(rounder, name):
    @overridable(name)
    def conv(a):
        with np.errstate(all="ignore"):
            r = rounder(np.asarray(a, dtype=F32)).astype(np.float64)
        r = np.nan_to_num(r, nan=0.0, posinf=2.0**31, neginf=-(2.0**31))
        # (np.asarray: a ufunc on a 0-d array returns a scalar, which a decomposition could
        # only describe by its value, as a constant; an array is an output later kernels view)
        return record(name, (a,), np.asarray(np.clip(r, -(2.0**31), 2.0**31 - 1).astype(np.int32)))
    return conv


add = _map(np.add, "add")
sub = _map(np.subtract, "sub")
mul = _map(np.multiply, "mul")
fma = _map(_fma, "fma")
div = _map(np.divide, "div")
sqrt = _map(np.sqrt, "sqrt")
neg = _map(np.negative, "neg")
abs_ = _map(np.abs, "abs")
max_ = _map(_maximum, "max")
min_ = _map(_minimum, "min")
rint = _map(np.rint, "rint")
floor = _map(np.floor, "floor")
trunc = _map(np.trunc, "trunc")


@overridable("ldexp")
def ldexp(a, n):
    with np.errstate(all="ignore"):
        out = canon(np.ldexp(np.asarray(a, F32), np.clip(np.asarray(n, np.int64), -400, 400).astype(np.int32)))
    return record("ldexp", (a, n), out)


@overridable("eq")
def eq(a, b):
    return record("eq", (a, b), np.asarray(np.asarray(a, F32) == np.asarray(b, F32)))


@overridable("lt")
def lt(a, b):
    return record("lt", (a, b), np.asarray(np.asarray(a, F32) < np.asarray(b, F32)))


@overridable("le")
def le(a, b):
    return record("le", (a, b), np.asarray(np.asarray(a, F32) <= np.asarray(b, F32)))


@overridable("select")
def select(cond, a, b):
    return record("select", (cond, a, b), canon(np.where(np.asarray(cond, bool), np.asarray(a, F32), np.asarray(b, F32))))


@overridable("from_int32")
def from_int32(i):
    return record("from_int32", (i,), np.asarray(i, np.int32).astype(F32))


to_int32_trunc = _to_int32(np.trunc, "to_int32_trunc")
to_int32_rne = _to_int32(np.rint, "to_int32_rne")


@overridable("copy")
def copy(a):
    return record("copy", (a,), np.array(a, dtype=F32, copy=True, order="C"))


_PLACED: dict = {}  # id(operand of a place() copy) -> (axis, background, [(start, step, piece)])


def placement(operand):
    """How place() laid out this operand, or None: (axis, background, [(start, step, piece)])."""
    return _PLACED.get(id(operand))


_UNSIGNED = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def moved(xp, host):
    """Host data as an array of xp, moved as bytes: CuPy moves a 0-d value by `fill`, a
    memset when it equals 0, so -0.0 would arrive as +0.0 (docs/NUMERICS.md §9)."""
    host = np.asarray(host, order="C")  # (ascontiguousarray would make a 0-d array 1-d)
    return xp.asarray(host.reshape(-1).view(np.uint8)).view(host.dtype).reshape(host.shape)


def filled(xp, shape, value, dtype=F32):
    """A new array of xp with every element `value`, written as its unsigned word: CuPy fills
    a value equal to 0 by memset, so xp.full(shape, -0.0) would hold +0.0."""
    dtype = np.dtype(dtype)
    out = xp.empty(tuple(shape), dtype)
    word = np.asarray(value, dtype).reshape(1).view(_UNSIGNED[dtype.itemsize])[0]
    out.view(_UNSIGNED[dtype.itemsize]).fill(word)
    return out


def place(shape, axis: int, pieces, background=0.0, kernel=None):
    """One copy kernel whose operand has `shape` and holds `background` everywhere but along
    `axis`, where piece (start, step, array) fills positions start, start + step, ... (the
    piece has the operand's shape but along axis; where pieces overlap the first one counts,
    as in a CAT descriptor). Padding, strided scatter and
    concatenation as data movement a referee can follow: the operand is described by the
    pieces' sources (docs/PROTOCOL.md, CAT), never materialised by the caller. kernel: the
    copy of another dtype (an integer one: the pieces' dtype, background a numpy scalar of it)."""
    device = [p for _, _, p in pieces if xp_of(p) is not np]
    xp = xp_of(device[0]) if device else np
    operand = filled(xp, shape, background, F32 if kernel is None else pieces[0][2].dtype)
    for start, step, a in reversed(pieces):  # the first piece written last: it counts
        at = [slice(None)] * len(shape)
        at[axis] = slice(start, start + step * (a.shape[axis] - 1) + 1, step)
        operand[tuple(at)] = a if xp_of(a) is xp else moved(xp, a)  # a host piece (a constant)
    _PLACED[id(operand)] = (axis, background, pieces)
    try:
        return (kernel or copy)(operand)
    finally:
        del _PLACED[id(operand)]


def pad(x, pads: dict, value=0.0):
    """x with `value` around it: pads = {axis: (before, after)}, one place() copy per axis."""
    for axis, (lo, hi) in sorted(pads.items()):
        if lo or hi:
            shape = list(x.shape)
            shape[axis] += lo + hi
            x = place(shape, axis, [(lo, 1, x)], value)
    return x


def wrote(dst, src, name="copy"):
    """An in-place op's tensor `dst` (its memory, as an array) now holds `src`: the copy
    kernel (`name`: copy.i64 for an integer tensor) whose output IS dst, so a decomposition
    says where the mutated tensor's values come from (the op's result is then this kernel's
    output, never the pre-op input). Nothing runs: the caller already wrote the values."""
    return record(name, (src,), dst)


# -- data movement that depends on integer data (docs/NUMERICS.md §10) ---------------------------
# Not binary32 arithmetic: each output element is one operand element picked by an index
# element, so a referee settles one by two Merkle proofs. Both keep the decomposition's
# structure independent of values (the index is an operand, never a Python loop bound).
@overridable("gather")
def gather(data, index, fill):
    """data [R, N, D] f32, index [R, M] int64, fill 0-d f32 -> [R, M, D]:
    out[r, m, d] = data[r, I, d] if 0 <= I < N else fill, I = index[r, m]."""
    return record("gather", (data, index, fill), picked(data, index, fill, F32))


def picked(data, index, fill, dtype):
    """gather's movement on data of any dtype: out[r, m, d] = data[r, I, d] if 0 <= I < N
    else fill, I = index[r, m] (the integer kernels' gather.<dtype> too)."""
    xp = xp_of(data)
    r, n, _ = data.shape
    i = xp.asarray(index, np.int64)
    ok = (i >= 0) & (i < n)
    rows = data[xp.arange(r)[:, None], xp.where(ok, i, 0)]
    return xp.where(ok[..., None], rows, xp.asarray(fill, dtype)).astype(dtype)


@overridable("onehot")
def onehot(index, value, fill):
    """index [R] int64, value [R] f32, fill [N] f32 -> [R, N]:
    out[r, c] = value[r] if c == index[r] else fill[c]."""
    xp = xp_of(index)
    i = xp.asarray(index, np.int64)
    hit = xp.arange(fill.shape[0])[None, :] == i[:, None]
    return record("onehot", (index, value, fill), xp.where(hit, xp.asarray(value, F32)[:, None],
                                                            xp.asarray(fill, F32)[None, :]).astype(F32))


MOVEMENT = {"gather": gather, "onehot": onehot}


# -- counter-based random bits (docs/NUMERICS.md §12) ----------------------------------------------
# Philox4x32-10 (Salmon et al., SC'11; Random123's constants): a pure function of a 128-bit
# counter and a 64-bit key, so element i of a mask is computable alone, by any backend and by
# the referee, with no generator state to carry.
PHILOX_M = (0xD2511F53, 0xCD9E8D57)
PHILOX_W = (0x9E3779B9, 0xBB67AE85)
_U32 = np.uint64(0xFFFFFFFF)


def philox4x32(counter, key, rounds: int = 10):
    """counter: 4 arrays of uint32 words, key: 2 -> the 4 output words (numpy uint64 arrays
    holding uint32 values). Round r: (hi0, lo0) = M0 * c0, (hi1, lo1) = M1 * c2 (64-bit
    products); c = (hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0); then k += W (mod 2^32)."""
    c = [np.asarray(w, np.uint64) & _U32 for w in counter]
    k0, k1 = (np.asarray(w, np.uint64) & _U32 for w in key)
    m0, m1 = np.uint64(PHILOX_M[0]), np.uint64(PHILOX_M[1])
    for r in range(rounds):
        if r:
            k0, k1 = (k0 + np.uint64(PHILOX_W[0])) & _U32, (k1 + np.uint64(PHILOX_W[1])) & _U32
        p0, p1 = m0 * c[0], m1 * c[2]
        c = [(p1 >> np.uint64(32)) ^ c[1] ^ k0, p1 & _U32, (p0 >> np.uint64(32)) ^ c[3] ^ k1, p0 & _U32]
    return c


def _word(a):
    """int32 operand elements as unsigned 32-bit words."""
    return np.asarray(a).astype(np.int64).astype(np.uint64) & _U32


def int32_word(word: int) -> np.ndarray:
    """A 32-bit word (any Python int: its low 32 bits) as a 0-d int32 operand."""
    return np.array(word & 0xFFFFFFFF, np.uint32).view(np.int32)


def single_words(operands):
    """Each operand's one value as an unsigned word (a 0-d array, or one value broadcast), or
    None when one varies or is empty: what lets a compiled philox kernel take words."""
    words = []
    for a in operands:
        a = np.asarray(a)
        if a.size == 0 or (a.size > 1 and any(a.strides)):
            return None
        words.append(int(a.flat[0]) & 0xFFFFFFFF)
    return words


def philox_keep(i, step, seed, stream, threshold):
    """Whether philox keeps element i (an int or uint64 array) under these operand words:
    word 0 of philox4x32_10(counter = (i mod 2^32, i div 2^32, step, 0), key = (seed,
    stream)) >= threshold, unsigned. The one statement of the counter's layout (the kernels
    and Philox.sol follow it; the referee calls it for one element)."""
    i = np.asarray(i, np.uint64)
    return philox4x32((i & _U32, i >> np.uint64(32), step, 0), (seed, stream))[0] >= _word(threshold)


@overridable("philox")
def philox(step, seed, stream, threshold):
    """step, seed, stream, threshold: int32 operands, broadcast together to the output's shape
    (the threshold, a constant, carries it) -> bool: element i (flat, row-major) is
    philox_keep(i, ...). Keeps an element with probability 1 - t / 2^32."""
    operands = (step, seed, stream, threshold)
    shape = np.broadcast_shapes(*(np.shape(a) for a in operands))
    i = np.arange(int(np.prod(shape)), dtype=np.uint64).reshape(shape)
    return record("philox", operands, np.asarray(philox_keep(i, *(_word(a) for a in operands[:3]), threshold)))


# name -> reference kernel; the same names as offchain.softfloat.float32.PRIMITIVES
PRIMS = {
    "add": add, "sub": sub, "mul": mul, "fma": fma, "div": div, "sqrt": sqrt, "neg": neg, "abs": abs_,
    "min": min_, "max": max_, "eq": eq, "lt": lt, "le": le, "select": select, "rint": rint, "floor": floor,
    "trunc": trunc, "ldexp": ldexp, "from_int32": from_int32, "to_int32_trunc": to_int32_trunc,
    "to_int32_rne": to_int32_rne, "copy": copy,
}
