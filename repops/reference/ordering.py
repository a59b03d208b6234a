"""Order statistics with integer results (docs/NUMERICS.md §8, "Ordering"): max/min with their
index, sort, argsort, topk, and the writes whose duplicates torch resolves by order (scatter,
x[idx] = v). Each is binary32 comparisons, integer kernels (reference/integers.py) and gathers,
so every index it returns is a kernel output a referee can follow, and every rule is written:

- ties: the first (lowest) position wins (max/min with index); sort is stable;
- NaN is greater than every number (torch: max/min return it, sort puts it last ascending
  and first descending, topk picks it first), and NaNs are equal to each other;
- a write of several sources to one target: the last source (in row-major order) wins, as
  torch's CPU loop does.

Counts and positions are reduced as binary32 folds (one kernel each on every backend): the
integers involved are below 2^24, so every sum, min and max of them is exact, and a
to_int32_rne then to_i64 brings the result back. So an op costs a fixed number of kernels;
the order-resolved writes and a sort up to MAX_SORTED compare every pair (O(n^2) elements),
which fits what models sort (experts, heads, a few thousand tokens); a longer sort runs a
bitonic network (O(n log^2 n)) with the same result."""
from __future__ import annotations

import numpy as np

from . import integers as I
from . import prims as P
from .fold import fold_dims, sum_dims

F32 = np.float32
MAX_SORTED = 4096  # n beyond this: sort by a network (O(n log^2 n)); mode and the writes: refused (O(n^2))


def kernel(name: str):
    """The integer kernel `name` (op.dtype) on host arrays; on a device array (no decomposition
    observes there) the same exact arithmetic with the array's own module."""
    ref = I.KERNELS[name]
    op, dt = name.split(".")

    def run(*xs):
        if all(P.xp_of(x) is np for x in xs):
            return ref(*xs)
        xp = next(P.xp_of(x) for x in xs if P.xp_of(x) is not np)
        rdt = I.result_dtype(op, dt)
        out = I.OPS[op][1](*[xp.asarray(x) for x in xs])
        return out.astype(I.DTYPES[rdt] if rdt != "f32" else F32)
    return run


K = {name: kernel(name) for name in I.KERNELS if not name.startswith("gather")}


def const(v, dt="i64"):
    return I.const(v, dt)


def positions(n: int, xp=np) -> np.ndarray:
    """0, 1, ..., n-1 as int64 kernel outputs: ones (a copy of a constant) scanned by
    Hillis-Steele (y += y shifted by 1, 2, 4, ...; each shift one place() copy), minus 1."""
    y = K["copy.i64"](I.const(1, "i64", (n,)))
    by = 1
    while by < n:
        y = K["add.i64"](y, P.place((n,), 0, [(by, 1, y[:n - by])], I.DTYPES["i64"].type(0), K["copy.i64"]))
        by *= 2
    return K["sub.i64"](y, const(1))


# -- NaN-aware comparisons (bool results) -------------------------------------------------------------------
def is_nan(x):
    return K["not.bool"](P.eq(x, x))


def less(a, b):
    """a < b with NaN greatest: lt(a, b) or (a is a number and b is NaN)."""
    return K["or.bool"](P.lt(a, b), K["and.bool"](P.eq(a, a), is_nan(b)))


def same(a, b):
    """a == b with NaN equal to NaN."""
    return K["or.bool"](P.eq(a, b), K["and.bool"](is_nan(a), is_nan(b)))


def to_index(f):
    """An exact integer-valued binary32 array (|v| < 2^24) as int64: to_int32_rne, to_i64."""
    return K["to_i64.i32"](P.to_int32_rne(f))


def _as_f32(i):
    return K["to_f32.i64"](i) if i.dtype == np.int64 else K["to_f32.bool"](i)


# -- max / min with index ------------------------------------------------------------------------------------
def fold_min(x, dims, keepdim=False):
    """min over dims as neg(fold(max)(neg x)): the same bits as fold(min) from +inf (NaN wins,
    -0 < +0), on the compiled fold kernel (which has add and max)."""
    if P.xp_of(x) is np and not x.flags.c_contiguous:  # (numpy keeps a strided input's layout in a
        x = P.copy(x)                                   # map's output: views of it would name nothing)
    return P.neg(fold_dims(P.max_, P.neg(x), dims, -np.inf, keepdim))


def first_true(hit):
    """The index of the first true along the last axis (n where none), int64: the min over
    the axis of select.i64(hit, position, n), as -fold(max)(select.i64(hit, -position, -n))
    in binary32."""
    n = hit.shape[-1]
    cand = K["select.i64"](hit, K["neg.i64"](positions(n)), const(-n))
    return to_index(P.neg(fold_dims(P.max_, _as_f32(cand), [-1], -np.inf)))


def extreme(x, largest: bool):
    """(value, index) along the last axis: fold(max) from -inf (min from +inf; NaN wins), and
    the first position holding it (NaN: the first NaN)."""
    m = fold_dims(P.max_, x, [-1], -np.inf) if largest else fold_min(x, [-1])
    return m, first_true(same(x, m[..., None]))


# -- sort -------------------------------------------------------------------------------------------------------
def _count(flags):
    """How many true along the last axis, int64 (a binary32 sum of 0s and 1s: exact)."""
    return to_index(sum_dims(_as_f32(flags), [-1]))


def sort(x, descending: bool):
    """Stable sort along the last axis -> (values, int64 indices): by ranks (every pair compared)
    up to MAX_SORTED elements, by a bitonic network above. Both are the one order of the
    (value, position) pairs (NaN greatest, ties by position), so they give the same bits."""
    return (sort_by_rank if x.shape[-1] <= MAX_SORTED else sort_by_network)(x, descending)


def sort_by_rank(x, descending: bool):
    """Stable sort along the last axis -> (values, int64 indices). rank[i] = #{j: x_j before
    x_i} + #{j < i: x_j same as x_i}, where `before` is less (ascending) or less with the
    operands swapped (descending: NaN first); then index[r] = the sum over i of
    select(rank[i] = r, i, 0) (one i matches each r) and values = x gathered there."""
    n = x.shape[-1]
    pos = positions(n)
    xi, xj = x[..., :, None], x[..., None, :]
    before = less(xi, xj) if descending else less(xj, xi)       # [.., i, j]: x_j before x_i
    earlier = K["lt.i64"](pos[None, :], pos[:, None])            # [i, j]: j < i
    rank = _count(K["or.bool"](before, K["and.bool"](same(xj, xi), earlier)))
    match = K["eq.i64"](rank[..., None, :], pos[:, None])        # [.., r, i]
    idx = to_index(sum_dims(_as_f32(K["select.i64"](match, pos[None, :], const(0))), [-1]))
    rows = int(np.prod(x.shape[:-1]))
    data = x if x.flags.c_contiguous else P.copy(x)
    values = P.gather(data.reshape(rows, n, 1), idx.reshape(rows, n), P.const(0.0, ()))
    return values.reshape(x.shape), idx


def _exchange(v, i, lo, hi, descending):
    """One column of comparators: (lo, hi) index pairs of slices into v / i; hi's pair goes
    first where it is before lo's (value order, NaN greatest; equal values: the lower position).
    -> new (v_lo, v_hi), (i_lo, i_hi)."""
    a, b = v[lo], v[hi]
    ahead = less(a, b) if descending else less(b, a)
    swap = K["or.bool"](ahead, K["and.bool"](same(a, b), K["lt.i64"](i[hi], i[lo])))
    return ((P.select(swap, b, a), P.select(swap, a, b)),
            (K["select.i64"](swap, i[hi], i[lo]), K["select.i64"](swap, i[lo], i[hi])))


def sort_by_network(x, descending: bool):
    """Stable sort along the last axis by a bitonic network on (value, position) pairs: n padded
    to N = 2^p with positions n.. and a value that orders after every element (NaN ascending,
    -inf descending: ties go to the lower position); for k = 2, 4, ..., N: each block of k
    compares t with k-1-t, then for j = k/4, ..., 1 each block of 2j compares t with t + j.
    Each column: the comparisons (_exchange) and one place() copy each for values and positions
    (log2(N)(log2(N)+1)/2 columns)."""
    n = x.shape[-1]
    N = 1 << max(n - 1, 0).bit_length()
    lead = x.shape[:-1]
    pad = P.const(-np.inf if descending else np.nan, lead + (N - n,))
    v = P.place(lead + (N,), x.ndim - 1, [(0, 1, x), (n, 1, pad)])
    i = K["copy.i64"](np.broadcast_to(positions(N), lead + (N,)))
    zero = I.DTYPES["i64"].type(0)
    k = 2
    while k <= N:
        shape = lead + (N // k, k)                      # flip: t against k-1-t in each block of k
        vb, ib = v.reshape(shape), i.reshape(shape)
        lo, hi = (..., slice(0, k // 2)), (..., slice(k - 1, k // 2 - 1, -1))
        (vl, vh), (il, ih) = _exchange(vb, ib, lo, hi, descending)
        ax = len(shape) - 1
        v = P.place(shape, ax, [(0, 1, vl), (k // 2, 1, vh[..., ::-1])]).reshape(lead + (N,))
        i = P.place(shape, ax, [(0, 1, il), (k // 2, 1, ih[..., ::-1])], zero, K["copy.i64"]).reshape(lead + (N,))
        j = k // 4
        while j >= 1:                                   # half-cleaners: t against t + j in each block of 2j
            shape = lead + (N // (2 * j), 2, j)
            vb, ib = v.reshape(shape), i.reshape(shape)
            (vl, vh), (il, ih) = _exchange(vb, ib, (..., slice(0, 1), slice(None)), (..., slice(1, 2), slice(None)),
                                           descending)
            ax = len(shape) - 2
            v = P.place(shape, ax, [(0, 1, vl), (1, 1, vh)]).reshape(lead + (N,))
            i = P.place(shape, ax, [(0, 1, il), (1, 1, ih)], zero, K["copy.i64"]).reshape(lead + (N,))
            j //= 2
        k *= 2
    return v[..., :n], i[..., :n]


# -- writes where duplicates resolve by order -------------------------------------------------------------------
def last_source(target, n: int):
    """For each destination 0..n-1 along a new last axis, the last source position p (along
    target's last axis) with target[..., p] == destination, else -1: the max over p of
    select.i64(eq.i64(target[p], destination), p, -1), as a binary32 fold(max)."""
    m = target.shape[-1]
    if m == 0:
        return K["copy.i64"](I.const(-1, "i64", target.shape[:-1] + (n,)))
    match = K["eq.i64"](target[..., None, :], positions(n)[:, None])      # [.., t, p]
    cand = K["select.i64"](match, positions(m), const(-1))
    return to_index(fold_dims(P.max_, _as_f32(cand), [-1], -np.inf))


# -- scans and searches -------------------------------------------------------------------------------------------
def scan(prim, x, identity):
    """Inclusive scan along the last axis by Hillis-Steele: y = prim(y, y shifted by 1, 2, 4, ...
    (identity below); each shift one place() copy). Only for prims whose result does not depend
    on the association (max, min: exact), so it is the sequential scan's result."""
    n = x.shape[-1]
    y, by = x, 1
    while by < n:
        shifted = P.place(y.shape, y.ndim - 1, [(by, 1, y[..., :n - by])], identity)
        y, by = prim(y, shifted), by * 2
    return y if y is not x else P.copy(x)


def cumulative_extreme(x, largest: bool):
    """(values, int64 indices) of cummax (cummin) along the last axis, torch's CPU rule: the
    running maximum m_i (NaN wins), and the LAST position j <= i with x_j equal to m_j (NaN: the
    last NaN so far; -0 and +0 tie); values are x gathered there (so its bits, -0 included).
    The index is a running max of select.i64(same(x, m), position, 0), exact in binary32."""
    n = x.shape[-1]
    x = x if x.flags.c_contiguous else P.copy(x)  # (gathered from below: a reshape that copies names nothing)
    m = scan(P.max_ if largest else P.min_, x, -np.inf if largest else np.inf)
    cand = K["select.i64"](same(x, m), positions(n), const(0))
    idx = to_index(scan(P.max_, _as_f32(cand), -np.inf))
    rows = int(np.prod(x.shape[:-1]))
    values = P.gather(x.reshape(rows, n, 1), idx.reshape(rows, n), P.const(0.0, ()))
    return values.reshape(x.shape), idx


def binary_search(seq, v, right: bool):
    """torch.searchsorted's loop, step for step, for every value at once: start = 0, end = n;
    while start < end: mid = start + (end - start) // 2; left: !(seq[mid] >= v) (right:
    !(seq[mid] > v)) -> start = mid + 1, else end = mid. seq [R, n] f32, v [R, k] f32 ->
    [R, k] int64. The interval at least halves each step: bit_length(n) steps; a finished
    search (start == end) keeps its bounds. Exactly torch's answer also for a NaN or an unsorted
    sequence (the loop's path, not a count)."""
    (R, n), k = seq.shape, v.shape[-1]
    start = K["copy.i64"](I.const(0, "i64", (R, k)))
    end = K["copy.i64"](I.const(n, "i64", (R, k)))
    for _ in range(int(n).bit_length()):
        active = K["lt.i64"](start, end)
        mid = K["add.i64"](start, K["div_floor.i64"](K["sub.i64"](end, start), const(2)))
        at = P.gather(seq.reshape(R, n, 1), mid, P.const(0.0, ())).reshape(R, k)  # (mid = n only when done)
        stop = P.lt(v, at) if right else P.le(v, at)                               # seq[mid] > v (>= v)
        up = K["and.bool"](active, K["not.bool"](stop))
        start = K["select.i64"](up, K["add.i64"](mid, const(1)), start)
        end = K["select.i64"](K["and.bool"](active, stop), mid, end)
    return start
