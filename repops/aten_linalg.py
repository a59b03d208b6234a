"""Dense solvers on RepOps (repops/reference/solvers.py, docs/NUMERICS.md §8 "Dense solvers"):
Cholesky, triangular solves, LU with partial pivoting, solve, inverse, determinants. The ops
torch builds on these (linalg.cholesky, matrix_power, tensorinv, tensorsolve, logdet, and the
backward formulas of all of them) reach RepOps as these aten ops. A factorisation that fails
(a zero pivot in solve/inv, a matrix that is not positive definite in Cholesky) is the fault
rule `singular` (repops/faults.py): torch raises there, or returns LAPACK's partial work."""
from __future__ import annotations

import numpy as np
import torch

from . import faults
from .aten import arr, np_, register, tt
from .aten_sort import _ints
from .errors import UnsupportedOpError
from .reference import prims as P
from .reference import solvers as S
from .reference.fold import sum_dims
from .reference.math import log

aten = torch.ops.aten


def _square(a, op):
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise RuntimeError(f"{op}: A must be batches of square matrices, but they are {a.shape[-2:]} matrices")


# -- Cholesky ---------------------------------------------------------------------------------------------
def _cholesky(t, upper, op, check_info=True):
    a = np_(t, op)
    _square(a, op)
    L, d = S.cholesky(np.swapaxes(a, -1, -2) if upper else a)  # (upper: LAPACK reads the upper triangle)
    info = S.not_positive(d, L)
    if check_info:
        faults.nonsingular(info, op, "is not positive definite")
    return (S.transpose(L) if upper else L), info


@register(aten.linalg_cholesky_ex.default)
def linalg_cholesky_ex(a, *, upper=False, check_errors=False):
    """info != 0 is refused either way (the `singular` rule): torch's factor there is LAPACK's
    partial blocked work."""
    L, info = _cholesky(a, upper, "linalg_cholesky_ex")
    return tt(L), _ints(info)


@register(aten.cholesky.default)
def cholesky(a, upper=False):
    return tt(_cholesky(a, upper, "cholesky")[0])


def _cholesky_solve(b, f, upper):
    """x of (L Lᵀ) x = b: L y = b, Lᵀ x = y, L the lower factor of torch's (f, upper)."""
    L = S.transpose(f) if upper else f
    return S.solve_upper(S.transpose(L), S.solve_lower(L, b, False), False)


@register(aten.cholesky_solve.default)
def cholesky_solve(b, f, upper=False):
    op = "cholesky_solve"
    return tt(_cholesky_solve(np_(b, op), np_(f, op), upper))


@register(aten.cholesky_inverse.default)
def cholesky_inverse(f, upper=False):
    """(L Lᵀ)⁻¹ as cholesky_solve of the identity."""
    ff = np_(f, "cholesky_inverse")
    return tt(_cholesky_solve(S.identity(ff.shape), ff, upper))


# -- triangular solves --------------------------------------------------------------------------------------
@register(aten.linalg_solve_triangular.default)
def linalg_solve_triangular(a, b, *, upper, left=True, unitriangular=False):
    op = "linalg_solve_triangular"
    return tt(S.solve_triangular(np_(a, op), np_(b, op), upper, left, unitriangular))


@register(aten.triangular_solve.default)
def triangular_solve(b, a, upper=True, transpose=False, unitriangular=False):
    """(x of op(a) x = b, a clone of a); op(a) = aᵀ with transpose (of the other triangle)."""
    op = "triangular_solve"
    aa, bb = np_(a, op), np_(b, op)
    coef = aa
    if transpose:
        aa, upper = np.swapaxes(aa, -1, -2), not upper
    x = S.solve_triangular(aa, bb, upper, True, unitriangular)
    batch = np.broadcast_shapes(coef.shape[:-2], bb.shape[:-2])
    return tt(x), tt(P.copy(np.broadcast_to(coef, batch + coef.shape[-2:])))


# -- LU ---------------------------------------------------------------------------------------------------
def _lu(t, op, pivot=True):
    if not pivot:
        raise UnsupportedOpError(f"{op}: LU without pivoting is not defined by RepOps (torch computes it on CUDA "
                                 "only); use pivot=True")
    return S.lu_factor(np_(t, op))


def _factor(A, op):
    """torch's LU of A for det/slogdet: of Aᵀ when A is contiguous (torch's choice, which
    its backward formulas assume), -> (LU, pivots, info, transposed)."""
    a = np_(A, op)
    _square(a, op)
    flip = A.is_contiguous()
    LU, piv, info = S.lu_factor(np.swapaxes(a, -1, -2) if flip else a)
    return LU, piv, info, flip


@register(aten.linalg_lu_factor_ex.default)
def linalg_lu_factor_ex(a, *, pivot=True, check_errors=False):
    LU, piv, info = _lu(a, "linalg_lu_factor_ex", pivot)
    if check_errors:
        faults.nonsingular(info, "linalg_lu_factor_ex", "is singular")
    return tt(LU), _ints(piv), _ints(info)


@register(aten.lu_unpack.default)
def lu_unpack(LU, pivots, unpack_data=True, unpack_pivots=True):
    op = "lu_unpack"
    lu = np_(LU, op)
    Pm, L, U = S.lu_unpack(lu, arr(pivots), unpack_data, unpack_pivots)
    empty = torch.empty(0)
    return (tt(Pm) if Pm is not None else empty, tt(L) if L is not None else empty,
            tt(U) if U is not None else empty)


@register(aten.linalg_lu.default)
def linalg_lu(a, *, pivot=True):
    LU, piv, _ = _lu(a, "linalg_lu", pivot)
    Pm, L, U = S.lu_unpack(LU, piv)
    return tt(Pm), tt(L), tt(U)


@register(aten.linalg_lu_solve.default)
def linalg_lu_solve(LU, pivots, b, *, left=True, adjoint=False):
    op = "linalg_lu_solve"
    return tt(S.lu_solve(np_(LU, op), arr(pivots), np_(b, op), left, adjoint))


# -- solve, inverse ---------------------------------------------------------------------------------------
def _is_vector(A, B):
    return B.dim() == 1 or (A.dim() - 1 == B.dim() and tuple(B.shape) == tuple(A.shape[:-1]))


@register(aten._linalg_solve_ex.default)
def linalg_solve_ex(A, B, *, left=True, check_errors=False):
    """LU of A (torch returns that one, whatever A's layout), then lu_solve; a vector B as a
    column. A zero pivot is refused (`singular`): torch's answer there is inf/NaN garbage."""
    op = "_linalg_solve_ex"
    a = np_(A, op)
    _square(a, op)
    LU, piv, info = S.lu_factor(a)
    faults.nonsingular(info, op, "is singular")
    b = np_(B, op)
    vector = _is_vector(A, B)
    if vector:
        b = b[..., :, None] if left else b[..., None, :]
    x = S.lu_solve(LU, piv, b, left)
    if vector:
        x = x[..., :, 0] if left else x[..., 0, :]
        x = P.copy(x)
    return tt(x), tt(LU), _ints(piv), _ints(info)


@register(aten.linalg_inv_ex.default)
def linalg_inv_ex(A, *, check_errors=False):
    """solve(A, I); a singular A is refused (`singular`)."""
    op = "linalg_inv_ex"
    a = np_(A, op)
    _square(a, op)
    LU, piv, info = S.lu_factor(a)
    faults.nonsingular(info, op, "is singular")
    eye = S.identity(a.shape)
    return tt(S.lu_solve(LU, piv, eye)), _ints(info)


# -- determinants ---------------------------------------------------------------------------------------------
@register(aten._linalg_det.default)
def linalg_det(A):
    """(det, LU, pivots): det from the LU of Aᵀ (contiguous A, torch's choice; det Aᵀ = det A)."""
    op = "_linalg_det"
    LU, piv, _, _ = _factor(A, op)
    return tt(S.det_from_lu(LU, piv)), tt(LU), _ints(piv)


@register(aten._linalg_slogdet.default)
def linalg_slogdet(A):
    """(sign, log|det|, LU, pivots): sign = the permutation's sign times sgn(u_kk) = (0 < u) -
    (u < 0) (0 at a zero or NaN pivot, as torch), multiplied in order; log|det| = fold(add, -0) of log|u_kk|."""
    op = "_linalg_slogdet"
    LU, piv, _, _ = _factor(A, op)
    n = LU.shape[-1]
    sign = S.perm_sign(piv)
    diag = P.copy(np.diagonal(LU, 0, -2, -1)) if n else P.const(0.0, LU.shape[:-2] + (0,))
    zero = P.const(0.0, diag.shape)
    one = P.const(1.0, diag.shape)
    sg = P.sub(P.select(P.lt(zero, diag), one, zero), P.select(P.lt(diag, zero), one, zero))  # torch's sgn: NaN -> 0
    for k in range(n):
        sign = P.mul(sign, sg[..., k])
    logabs = sum_dims(log(P.abs_(diag)), [-1])
    return tt(sign), tt(logabs), tt(LU), _ints(piv)

