"""Small dense linear-algebra solvers as fixed-order compositions of the primitives
(docs/NUMERICS.md §8, "Dense solvers"): Cholesky, triangular solves, LU with partial pivoting
and what is built on them (solve, inverse, determinant). Unblocked, LAPACK's textbook order
(potf2, getf2, trsm's substitution), one step at a time, vectorised over the batch and the
independent entries of a step; the pivot is the first row holding the largest |value| of its
column (LAPACK's idamax rule), found by ordering's (value, index) and moved by gathers, so the
graph is the same whatever the values. Batched: leading dims are a batch (B = their product)."""
from __future__ import annotations

import numpy as np

from . import integers as I
from . import prims as P
from .fold import sum_dims
from .linalg import matmul
from .ordering import K, const, extreme, first_true, is_nan, positions

SFMIN = np.float32(np.finfo(np.float32).tiny)  # LAPACK's sfmin: 1 / sfmin does not overflow


def batched(a):
    """a [..., m, n] -> ([B, m, n] (a copy kernel when a is not contiguous), its batch shape)."""
    lead = a.shape[:-2]
    data = a if (P.xp_of(a) is not np or a.flags.c_contiguous) else P.copy(a)
    return data.reshape((int(np.prod(lead, dtype=np.int64)),) + a.shape[-2:]), lead


def _fill_rows(rows, shape):
    """Rows [.., 1, k] (a list, in order) as one [.., n, k] array: one place() copy."""
    return P.place(shape, len(shape) - 2, [(i, 1, r) for i, r in enumerate(rows)])


def transpose(a):
    """The last two axes swapped, as a copy kernel (a contiguous operand for later reshapes)."""
    return P.copy(np.swapaxes(a, -1, -2))


def identity(shape):
    """The identity [.., n, n] (`shape`): select(eq.i64(row, column), 1, +0) of positions, so
    every operand is a kernel output or a one-value constant."""
    n = shape[-1]
    pos = positions(n)
    return P.select(K["eq.i64"](pos[:, None], pos[None, :]), P.const(1.0, shape), P.const(0.0, shape))


# -- Cholesky ---------------------------------------------------------------------------------------------
def cholesky(a):
    """Lower factor L of a [.., n, n] (only its lower triangle read), potf2's order: for
    j = 0..n-1: d = a[j, j], then d = fma(-L[j, k], L[j, k], d) for k = 0..j-1, L[j, j] = sqrt(d);
    for each i > j: s = a[i, j], s = fma(-L[i, k], L[j, k], s) for k < j, L[i, j] = s / L[j, j].
    Above the diagonal +0. -> (L, the pivots d [.., n]: positive and not NaN where a is
    positive definite; info = 1 + the first j where d is not, else 0 (LAPACK stops there; so do
    the callers: see `not_positive`)."""
    n = a.shape[-1]
    cols, ds = [], []
    for j in range(n):
        d = a[..., j:j + 1, j]                               # [.., 1]
        for k in range(j):
            lj = cols[k][..., j:j + 1]
            d = P.fma(P.neg(lj), lj, d)
        ds.append(d)
        root = P.sqrt(d)
        s = a[..., j + 1:, j]                                # [.., n-j-1]
        for k in range(j):
            s = P.fma(P.neg(cols[k][..., j + 1:]), cols[k][..., j:j + 1], s)
        below = P.div(s, root)
        col = P.place(a.shape[:-1], a.ndim - 2, [(j, 1, root), (j + 1, 1, below)] if j + 1 < n else [(j, 1, root)])
        cols.append(col)
    if n == 0:
        return P.copy(a), P.const(1.0, a.shape[:-1])
    L = P.place(a.shape, a.ndim - 1, [(j, 1, c[..., None]) for j, c in enumerate(cols)])
    return L, P.place(a.shape[:-1], a.ndim - 2, [(j, 1, d) for j, d in enumerate(ds)])


def not_positive(d, L):
    """Cholesky's info from its pivots d [.., n] and factor L [.., n, n]: 1 + the first j where
    not (0 < d_j < inf) (NaN included) or column j of L holds a non-finite value (not
    eq(x 0, 0)): there torch's LAPACK stops or propagates in its own order; else 0. int32 [..]."""
    pos = P.lt(P.const(0.0, d.shape), d)
    finite_d = P.eq(P.mul(d, P.const(0.0, d.shape)), P.const(0.0, d.shape))
    nonfinite = K["not.bool"](P.eq(P.mul(L, P.const(0.0, L.shape)), P.const(0.0, L.shape)))
    col_bad = P.lt(P.const(0.0, d.shape), sum_dims(K["to_f32.bool"](nonfinite), [-2]))
    return _info(K["or.bool"](K["not.bool"](K["and.bool"](pos, finite_d)), col_bad))


def _info(bad):
    n = bad.shape[-1]
    if n == 0 or bad.size == 0:
        return K["copy.i32"](I.const(0, "i32", bad.shape[:-1]))
    at = first_true(bad)                                     # n where none
    info = K["select.i64"](K["eq.i64"](at, const(n)), const(0), K["add.i64"](at, const(1)))
    return K["to_i32.i64"](info)


# -- triangular solves --------------------------------------------------------------------------------------
def solve_lower(a, b, unit: bool):
    """x with a x = b, a [.., n, n] lower (only its lower triangle read), b [.., n, k], batch
    dims broadcast: for i = 0..n-1: s = b[i], s = fma(-a[i, j], x[j], s) for j = 0..i-1 in order,
    x[i] = s / a[i, i] (unit: s)."""
    return _substitute(a, b, unit, range(a.shape[-1]))


def solve_upper(a, b, unit: bool):
    """x with a x = b, a upper: i = n-1 down to 0, j = n-1 down to i+1 (back substitution)."""
    return _substitute(a, b, unit, range(a.shape[-1] - 1, -1, -1))


def _substitute(a, b, unit, order):
    n, k = a.shape[-1], b.shape[-1]
    shape = np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (n, k)
    if n == 0 or k == 0:
        return P.copy(np.broadcast_to(b, shape))
    row = shape[:-2] + (1, k)
    xs, done = {}, []
    for i in order:
        s, fresh = b[..., i:i + 1, :], bool(done) or not unit
        for j in done:
            s = P.fma(P.neg(a[..., i:i + 1, j:j + 1]), xs[j], s)
        if not unit:
            s = P.div(s, a[..., i:i + 1, i:i + 1])
        xs[i] = s if fresh and s.shape == row else P.copy(np.broadcast_to(s, row))
        done.append(i)
    return _fill_rows([xs[i] for i in range(n)], shape)


def solve_triangular(a, b, upper: bool, left: bool, unit: bool):
    """torch.linalg.solve_triangular: left a x = b; right x a = b as aᵀ xᵀ = bᵀ (aᵀ of the
    other triangle)."""
    if left:
        return (solve_upper if upper else solve_lower)(a, b, unit)
    xt = (solve_lower if upper else solve_upper)(np.swapaxes(a, -1, -2), np.swapaxes(b, -1, -2), unit)
    return transpose(xt)


def idamax(x):
    """LAPACK's idamax along the last axis (MKL's too): the first position of the largest |x|;
    a NaN counts only in the first position (then it is the answer: the loop's strict
    greater-than never beats it), elsewhere never. As kernels: extreme over
    select(NaN, -1, |x|) (ties: the lowest), then select.i64(x_0 is NaN, 0, that)."""
    a = P.abs_(x)
    _, i = extreme(P.select(is_nan(a), P.const(-1.0, a.shape), a), True)
    return K["select.i64"](is_nan(a[..., 0]), const(0), i)


# -- LU with partial pivoting -------------------------------------------------------------------------------
def lu_factor(a):
    """getf2 on a [.., m, n]: for k = 0..min(m, n)-1: p = the first row r >= k with the largest
    |S[r, k]| (`idamax`), rows k and p swapped (a gather of every row);
    d = S[k, k]; below it l = S[r, k] (1 / d) (|d| below the smallest normal: S[r, k] / d;
    d = 0: left as it is: LAPACK's dscal rule); the rest S[r, c] = S[r, c] - l[r] S[k, c]
    for r, c > k (two roundings, not an fma: MKL's bits for n <= 16 on most inputs, and an
    exactly singular integer matrix keeps its exact zero pivot as in torch). -> (LU [.., m, n], pivots [.., K] int32
    1-based as LAPACK's ipiv, info [..] int32: 1 + the first k with d = 0, else 0)."""
    S, lead = batched(a)
    B, m, n = S.shape
    kk = min(m, n)
    S = P.copy(S)
    pos = positions(m)
    pivs = []
    for k in range(kk):
        p = K["add.i64"](idamax(S[:, k:, k]), const(k))
        pivs.append(p)
        rows = K["select.i64"](K["eq.i64"](pos, const(k)), p[:, None],
                               K["select.i64"](K["eq.i64"](pos, p[:, None]), const(k), pos))
        S = P.gather(S, rows, P.const(0.0, ()))               # [B, m, n]
        if k + 1 >= m:
            continue
        d = S[:, k:k + 1, k]                                   # [B, 1]
        col = S[:, k + 1:, k]
        scaled = P.select(P.le(P.const(SFMIN, d.shape), P.abs_(d)), P.mul(col, P.div(P.const(1.0, d.shape), d)),
                          P.div(col, d))
        l = P.select(P.eq(d, P.const(0.0, d.shape)), col, scaled)
        pieces = [(0, 1, S[:, k + 1:, :k])] if k else []
        pieces.append((k, 1, l[:, :, None]))
        if k + 1 < n:
            rest = P.sub(S[:, k + 1:, k + 1:], P.mul(l[:, :, None], S[:, k:k + 1, k + 1:]))
            pieces.append((k + 1, 1, rest))
        lower = P.place((B, m - k - 1, n), 2, pieces)
        S = P.place((B, m, n), 1, [(0, 1, S[:, :k + 1, :]), (k + 1, 1, lower)])
    if kk:
        piv = P.place((B, kk), 1, [(k, 1, p[:, None]) for k, p in enumerate(pivs)],
                                                   I.DTYPES["i64"].type(0), K["copy.i64"])
        diag = P.copy(np.diagonal(S, 0, 1, 2)[:, :kk])
        info = _info(P.eq(diag, P.const(0.0, diag.shape)))
        pivots = K["to_i32.i64"](K["add.i64"](piv, const(1)))
    else:
        pivots = K["copy.i32"](I.const(0, "i32", (B, 0)))
        info = K["copy.i32"](I.const(0, "i32", (B,)))
    return S.reshape(a.shape), pivots.reshape(lead + (kk,)), info.reshape(lead)


def permutation_t(pivots, m: int):
    """Pᵀ [.., m, m] of LAPACK's pivots [.., K] (1-based): the identity's rows swapped k <-> piv[k]-1
    for k = 0..K-1 in order (gathers, exact), so Pᵀ a = L U (torch: a = P L U)."""
    lead = pivots.shape[:-1]
    pv = pivots.reshape(int(np.prod(lead, dtype=np.int64)), pivots.shape[-1])
    B = pv.shape[0]
    T = identity((B, m, m))
    pos = positions(m)
    p64 = K["sub.i64"](K["to_i64.i32"](pv), const(1))
    for k in range(pv.shape[-1]):
        p = p64[:, k:k + 1]
        rows = K["select.i64"](K["eq.i64"](pos, const(k)), p,
                               K["select.i64"](K["eq.i64"](pos, p), const(k), pos))
        T = P.gather(T, rows, P.const(0.0, ()))
    return T.reshape(lead + (m, m))


def lu_unpack(LU, pivots, unpack_data=True, unpack_pivots=True):
    """(P, L, U) with a = P L U: L [.., m, K] the unit lower part, U [.., K, n] the upper part
    (selects against a constant triangle mask), P = (Pᵀ)ᵀ of `permutation_t`."""
    m, n = LU.shape[-2:]
    kk = min(m, n)
    out = []
    if unpack_pivots:
        out.append(transpose(permutation_t(pivots, m)))
    else:
        out.append(None)
    if unpack_data:
        r, c = positions(m)[:, None], positions(n)[None, :]
        zero = P.const(0.0, LU.shape)
        Lm = P.select(K["lt.i64"](c, r), LU, zero)
        Lm = P.select(K["eq.i64"](c, r), P.const(1.0, LU.shape), Lm)[..., :, :kk]
        U = P.select(K["le.i64"](r, c), LU, zero)[..., :kk, :]
        out += [P.copy(Lm), P.copy(U)]
    else:
        out += [None, None]
    return tuple(out)


def lu_solve(LU, pivots, b, left=True, adjoint=False):
    """x of a x = b from a's LU (getrs): left, not adjoint: y = Pᵀ b (the swaps, gathers),
    L y' = y (unit lower), U x = y'. adjoint (real: aᵀ x = b): Uᵀ z = b (lower), Lᵀ w = z (unit
    upper), x = P w. Right (x a = b): the left solve of aᵀ (adjoint flipped) on bᵀ."""
    if not left:
        return transpose(lu_solve(LU, pivots, np.swapaxes(b, -1, -2), True, not adjoint))
    m = LU.shape[-1]
    Pt = permutation_t(pivots, m)
    if not adjoint:
        y = matmul(Pt, b)
        y = solve_lower(LU, y, True)
        return solve_upper(LU, y, False)
    LUt = np.swapaxes(LU, -1, -2)
    z = solve_lower(LUt, b, False)
    w = solve_upper(LUt, z, True)
    return matmul(transpose(Pt), w)


def det_from_lu(LU, pivots):
    """det = (-1)^(swaps) times the product of U's diagonal, multiplied in order from it:
    d = perm_sign; d = d u_kk for k = 0..n-1."""
    d = perm_sign(pivots)
    for k in range(LU.shape[-1]):
        d = P.mul(d, LU[..., k, k])
    return d


def perm_sign(pivots):
    """+1 or -1 [..] by the parity of the count of k with piv[k] != k+1 (LAPACK's 1-based
    pivots [.., K]): integer kernels, summed in order, parity by rem_floor."""
    n = pivots.shape[-1]
    if n == 0:
        return P.const(1.0, pivots.shape[:-1])
    moved = K["not.bool"](K["eq.i64"](K["to_i64.i32"](pivots), K["add.i64"](positions(n), const(1))))
    count = K["to_i64.bool"](moved)
    total = count[..., 0]
    for k in range(1, n):
        total = K["add.i64"](total, count[..., k])
    odd = K["eq.i64"](K["rem_floor.i64"](total, const(2)), const(1))
    return P.select(odd, P.const(-1.0, odd.shape), P.const(1.0, odd.shape))
