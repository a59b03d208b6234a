"""RepOps definitions of the aten ops that float32 training dispatches.

Each float-producing op is defined ONCE here as a composition of the binary32 primitives,
folds and matmul (docs/NUMERICS.md, "Operators"); the backend table decides which
kernel runs (repops.backends: reference numpy, or compiled kernels with the same bits), and the
tests check that every backend gives the same bits. Ops that only move or alias data are
exact and run natively (EXACT). Anything else raises UnsupportedOpError.
"""
from __future__ import annotations

import numpy as np
import torch

from . import ops as _ops  # noqa: F401  (defines torch.ops.repops.*)
from .errors import DTypeError, UnsupportedOpError
from .reference import linalg as RL
from .reference import math as M
from .reference import nn as N
from .reference import optim as RO
from .reference import prims as P
from .reference.fold import _dims, fold_dims, mean_dims, sum_dims

aten = torch.ops.aten
F32 = np.float32


# -- tensor <-> numpy ----------------------------------------------------------------------------
def np_(t, op) -> np.ndarray:
    """A float32 view of a tensor argument (python numbers and 0-dim wrapped scalars become
    float32 scalars, rounded once from their double value)."""
    if isinstance(t, (int, float, bool)):
        return np.asarray(t, F32)
    if t.dtype == torch.float32:
        return arr(t)
    if t.dim() == 0 and t.dtype.is_floating_point:
        return np.asarray(t.item(), F32)
    if t.dtype.is_floating_point:
        raise DTypeError(f"{op}: RepOps v1 computes in float32; got a {t.dtype} tensor of shape "
                         f"{tuple(t.shape)}. Convert the model and data with .float().")
    return arr(t)


def arr(t: torch.Tensor):
    """The tensor's data as an array of its device: numpy (shared memory) or CuPy (DLPack,
    zero-copy)."""
    if t.device.type == "cuda":
        import cupy
        return cupy.from_dlpack(t.detach())
    return t.detach().numpy()


def tt(a) -> torch.Tensor:
    if P.xp_of(a) is not np:
        return torch.from_dlpack(a.astype(F32, copy=False))
    a = np.asarray(a, dtype=F32)  # (np.ascontiguousarray would turn 0-d into 1-d)
    return torch.from_numpy(a if a.flags.c_contiguous and a.flags.writeable else a.copy())


def full(shape, v):
    return P.const(v, shape)


REGISTRY: dict = {}


def register(*ops):
    def deco(fn):
        for op in ops:
            REGISTRY[op] = fn
        return fn
    return deco


def _inplace(self, result):
    mine = arr(self)
    if not (P.xp_of(result) is P.xp_of(mine) and getattr(result, "shape", None) == mine.shape
            and _data(result) == _data(mine)):  # a kernel that already wrote in place needs no copy
        self.copy_(tt(result))  # exact copy back into the mutated tensor
    P.wrote(mine, result)  # the decomposition's last kernel: its output is self
    return self


def _data(a) -> int:
    return a.data.ptr if P.xp_of(a) is not np else a.__array_interface__["data"][0]


# -- elementwise ------------------------------------------------------------------------------------
def _scaled(b, alpha, op):
    return b if alpha == 1 else P.mul(b, np_(alpha, op))


def _binary(prim, name, inplace=False, reflected=False):
    """aten binary op: prim(a, alpha * b) (the mul only when alpha != 1); in-place variants
    copy the result back into a; reflected (rsub) swaps the operands."""
    def impl(a, b, alpha=1):
        x, y = np_(a, name), np_(b, name)
        if reflected:
            x, y = y, x
        r = prim(x, _scaled(y, alpha, name))
        return _inplace(a, r) if inplace else tt(r)
    return impl


for _name, _prim in (("add", P.add), ("sub", P.sub), ("mul", P.mul), ("div", P.div)):
    register(getattr(aten, _name).Tensor, getattr(aten, _name).Scalar)(_binary(_prim, _name))
    register(getattr(aten, _name + "_").Tensor, getattr(aten, _name + "_").Scalar)(_binary(_prim, _name + "_", True))
register(aten.rsub.Scalar, aten.rsub.Tensor)(_binary(P.sub, "rsub", reflected=True))


def _rsqrt(x):
    return P.div(full(x.shape, 1.0), P.sqrt(x))


def _unary(fn, name):
    return lambda a: tt(fn(np_(a, name)))


# rsqrt(x) = 1 / sqrt(x): two correctly rounded primitives (no hardware rsqrt).
for _name, _fn in (("neg", P.neg), ("abs", P.abs_), ("sqrt", P.sqrt), ("rsqrt", _rsqrt), ("exp", M.exp), ("log", M.log),
                   ("tanh", M.tanh), ("sigmoid", M.sigmoid), ("sin", M.sin), ("cos", M.cos)):
    register(getattr(aten, _name).default)(_unary(_fn, _name))


@register(aten.pow.Tensor_Scalar)
def pow_(a, p):
    x = np_(a, "pow")
    if p in (2, 3, 4, -2, -3, -4):  # ((x*x)*x)*x, left to right; negative: 1 / that
        y = x
        for _ in range(abs(int(p)) - 1):
            y = P.mul(y, x)
        return tt(y if p > 0 else P.div(full(x.shape, 1.0), y))
    if p == 1:
        return tt(P.copy(x))
    if p == 0.5:
        return tt(P.sqrt(x))
    if p == -1:
        return tt(P.div(full(x.shape, 1.0), x))
    if p == -0.5:
        return tt(_rsqrt(x))
    raise UnsupportedOpError(f"aten.pow.Tensor_Scalar with exponent {p!r}: RepOps defines pow only for "
                             "exponents +-1..4, 0.5, -0.5 (write x*x*x or exp(p*log(x)) explicitly)")


_INT_CMP = {P.lt: np.less, P.le: np.less_equal, P.eq: np.equal}


def _compare(prim, swap=False, negate=False):
    def cmp(a, b):
        ints = not any(isinstance(v, torch.Tensor) and v.is_floating_point() or isinstance(v, float) for v in (a, b))
        x, y = (arr(v) if isinstance(v, torch.Tensor) else v for v in (a, b)) if ints else \
            (np_(a, "compare"), np_(b, "compare"))
        f = _INT_CMP[prim] if ints else prim  # integers compare exactly as integers
        r = f(y, x) if swap else f(x, y)
        r = ~r if negate else r
        return torch.from_numpy(np.asarray(r)) if P.xp_of(r) is np else torch.from_dlpack(r)
    return cmp


# IEEE comparisons are exact; NaN compares false (ne: true).
register(aten.lt.Tensor, aten.lt.Scalar)(_compare(P.lt))
register(aten.le.Tensor, aten.le.Scalar)(_compare(P.le))
register(aten.gt.Tensor, aten.gt.Scalar)(_compare(P.lt, swap=True))
register(aten.ge.Tensor, aten.ge.Scalar)(_compare(P.le, swap=True))
register(aten.eq.Tensor, aten.eq.Scalar)(_compare(P.eq))
register(aten.ne.Tensor, aten.ne.Scalar)(_compare(P.eq, negate=True))


@register(aten.tanh_backward.default)
def tanh_backward(grad, y):
    return tt(N.tanh_backward(np_(grad, "tanh_backward"), np_(y, "tanh_backward")))


@register(aten.sigmoid_backward.default)
def sigmoid_backward(grad, y):
    return tt(N.sigmoid_backward(np_(grad, "sigmoid_backward"), np_(y, "sigmoid_backward")))


@register(aten.relu.default)
def relu(a):
    """relu(x) = max(x, +0) (NaN stays NaN)."""
    x = np_(a, "relu")
    return tt(P.max_(x, full(x.shape, 0.0)))


@register(aten.threshold_backward.default)
def threshold_backward(grad, x, threshold):
    g, x = np_(grad, "threshold_backward"), np_(x, "threshold_backward")
    return tt(P.select(P.lt(full(x.shape, threshold), x), g, full(g.shape, 0.0)))


_GELU = {"none": (N.gelu, N.gelu_backward), "tanh": (N.gelu_tanh, N.gelu_tanh_backward)}


def _gelu_form(op, approximate):
    if approximate not in _GELU:
        raise UnsupportedOpError(f"{op} with approximate={approximate!r}: 'none' (erf) and 'tanh' are defined")
    return _GELU[approximate]


@register(aten.gelu.default)
def gelu(a, approximate="none"):
    return tt(_gelu_form("aten.gelu", approximate)[0](np_(a, "gelu")))


@register(aten.gelu_backward.default)
def gelu_backward(grad, a, approximate="none"):
    return tt(_gelu_form("aten.gelu_backward", approximate)[1](np_(grad, "gelu_backward"), np_(a, "gelu_backward")))


@register(aten.silu.default)
def silu(a):
    return tt(N.silu(np_(a, "silu")))


@register(aten.silu_backward.default)
def silu_backward(grad, a):
    return tt(N.silu_backward(np_(grad, "silu_backward"), np_(a, "silu_backward")))


def _masked_fill(a, mask, value):
    x = np_(a, "masked_fill")
    return P.select(arr(mask), full(x.shape, np_(value, "masked_fill")), x)


register(aten.masked_fill.Scalar, aten.masked_fill.Tensor)(lambda a, m, v: tt(_masked_fill(a, m, v)))
register(aten.masked_fill_.Scalar, aten.masked_fill_.Tensor)(lambda a, m, v: _inplace(a, _masked_fill(a, m, v)))


@register(aten.addcmul_.default)
def addcmul_(self, t1, t2, value=1):
    """self + value * (t1 * t2)."""
    x = np_(self, "addcmul_")
    return _inplace(self, P.add(x, P.mul(np_(value, "addcmul_"), P.mul(np_(t1, "addcmul_"), np_(t2, "addcmul_")))))


@register(aten.addcdiv_.default)
def addcdiv_(self, t1, t2, value=1):
    """self + value * (t1 / t2)."""
    x = np_(self, "addcdiv_")
    return _inplace(self, P.add(x, P.mul(np_(value, "addcdiv_"), P.div(np_(t1, "addcdiv_"), np_(t2, "addcdiv_")))))


@register(aten.lerp_.Scalar, aten.lerp_.Tensor)
def lerp_(self, end, weight):
    """self + weight * (end - self)."""
    x = np_(self, "lerp_")
    return _inplace(self, P.add(x, P.mul(np_(weight, "lerp_"), P.sub(np_(end, "lerp_"), x))))


# -- reductions ------------------------------------------------------------------------------------------
def _result_dtype(op, dtype):
    if dtype not in (None, torch.float32):
        raise DTypeError(f"{op} with dtype={dtype}: RepOps v1 accumulates and returns float32 only")


@register(aten.sum.dim_IntList, aten.sum.default)
def sum_(a, dims=None, keepdim=False, dtype=None):
    _result_dtype("sum", dtype)
    return tt(sum_dims(np_(a, "sum"), dims, keepdim))


@register(aten.mean.dim, aten.mean.default)
def mean(a, dims=None, keepdim=False, dtype=None):
    _result_dtype("mean", dtype)
    return tt(mean_dims(np_(a, "mean"), dims, keepdim))


@register(aten._softmax.default)
def softmax(a, dim, half_to_float=False):
    return tt(N.softmax(np_(a, "_softmax"), dim))


@register(aten._softmax_backward_data.default)
def softmax_backward(grad, y, dim, input_dtype=None):
    return tt(N.softmax_backward(np_(grad, "_softmax_backward_data"), np_(y, "_softmax_backward_data"), dim))


@register(aten._log_softmax.default)
def log_softmax(a, dim, half_to_float=False):
    return tt(N.log_softmax(np_(a, "_log_softmax"), dim))


@register(aten._log_softmax_backward_data.default)
def log_softmax_backward(grad, y, dim, input_dtype=None):
    return tt(N.log_softmax_backward(np_(grad, "_log_softmax_backward_data"), np_(y, "_log_softmax_backward_data"),
                                     dim))


def _indices(t, n: int, op: str, ignore=None):
    """An index tensor as int64 (a view when it already is one, so a decomposition sees a
    view of the op's input); an index outside [0, n) that is not `ignore` is an error."""
    i = arr(t).astype(np.int64, copy=False)
    bad = (i < 0) | (i >= n)
    if ignore is not None:
        if 0 <= ignore < n:
            raise UnsupportedOpError(f"{op}: ignore_index={ignore} is a class; RepOps needs it outside [0, {n})")
        bad &= i != ignore
    if i.size and bool(bad.any()):
        raise IndexError(f"{op}: an index is outside [0, {n})" + (" and is not ignore_index" if ignore is not None else ""))
    return i


def _nll_pick(x, target, ignore_index, fill):
    """x[r, target[r]] by the gather kernel; an ignored row (ignore_index is outside the
    classes) reads `fill`, so no value-dependent mask enters the kernel sequence."""
    rows, classes = x.shape
    t = _indices(target, classes, "nll_loss", ignore_index)
    picked = P.gather(x.reshape(rows, classes, 1), t.reshape(rows, 1), P.const(fill, ()))
    return picked.reshape(rows), t != ignore_index


@register(aten.nll_loss_forward.default)
def nll_loss_forward(x, target, weight, reduction, ignore_index):
    """mean reduction: -(sum of picked log-probs, in row order) / count. An ignored row's
    loss is +0 (reduction none) or -0 (summed), as neg(picked) with picked = -0 / +0."""
    if weight is not None or x.dim() != 2 or reduction not in (0, 1, 2):
        raise UnsupportedOpError("aten.nll_loss_forward: RepOps supports 2-D input, no class weights")
    picked, keep = _nll_pick(np_(x, "nll_loss_forward"), target, ignore_index, -0.0 if reduction == 0 else 0.0)
    loss = P.neg(picked)
    count = F32(int(keep.sum()))
    total = tt(np.asarray(count)).to(x.device)
    if reduction == 0:
        return tt(loss), total
    s = sum_dims(loss, None)
    out = P.div(s, np.asarray(count, F32)) if reduction == 1 else s
    return tt(out), total


@register(aten.nll_loss_backward.default)
def nll_loss_backward(grad, x, target, weight, reduction, ignore_index, total_weight):
    """d/dx[i, t_i] = -grad / total_weight (mean) or -grad (sum); +0 elsewhere (onehot)."""
    if weight is not None or x.dim() != 2:
        raise UnsupportedOpError("aten.nll_loss_backward: RepOps supports 2-D input, no class weights")
    rows, classes = x.shape
    t = _indices(target, classes, "nll_loss", ignore_index)
    g = np_(grad, "nll_loss_backward")
    v = P.neg(P.div(g, np_(total_weight, "nll_loss_backward")) if reduction == 1 else g)
    xp = P.xp_of(g)
    return tt(P.onehot(t, xp.broadcast_to(v, (rows,)), P.const(0.0, (classes,))))


# -- normalisation -------------------------------------------------------------------------------------------
@register(aten.native_layer_norm.default)
def layer_norm(a, normalized_shape, weight, bias, eps):
    x = np_(a, "native_layer_norm")
    w = np_(weight, "native_layer_norm") if weight is not None else None
    b = np_(bias, "native_layer_norm") if bias is not None else None
    y, mean, rstd = N.layer_norm(x, w, b, eps, len(normalized_shape))
    return tt(y), tt(mean), tt(rstd)


@register(aten.native_layer_norm_backward.default)
def layer_norm_backward(grad, a, normalized_shape, mean, rstd, weight, bias, mask):
    op = "native_layer_norm_backward"
    dx, dw, db = N.layer_norm_backward(np_(grad, op), np_(a, op), np_(mean, op), np_(rstd, op),
                                       np_(weight, op) if weight is not None else None, len(normalized_shape),
                                       weight is not None and mask[1], bias is not None and mask[2])
    return (tt(dx) if mask[0] else None), (None if dw is None else tt(dw)), (None if db is None else tt(db))


# -- linear algebra ----------------------------------------------------------------------------------------------
@register(aten.mm.default, aten.bmm.default, aten.matmul.default)
def mm(a, b):
    return tt(RL.matmul(np_(a, "mm"), np_(b, "mm")))


@register(aten.addmm.default)
def addmm(bias, a, b, beta=1, alpha=1):
    """(a @ b) + bias (beta = alpha = 1 only)."""
    if beta != 1 or alpha != 1:
        raise UnsupportedOpError(f"aten.addmm with beta={beta}, alpha={alpha}: only 1, 1 is defined")
    return tt(P.add(RL.matmul(np_(a, "addmm"), np_(b, "addmm")), np_(bias, "addmm")))


@register(aten.embedding.default)
def embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    """Rows of weight picked by the gather kernel (an index outside the table is an error)."""
    w = np_(weight, "embedding")
    t = _indices(indices, w.shape[0], "embedding")
    out = P.gather(w.reshape(1, *w.shape), t.reshape(1, -1), P.const(0.0, ()))
    return tt(out.reshape(*t.shape, w.shape[1]))


@register(aten.embedding_dense_backward.default)
def embedding_backward(grad, indices, num_weights, padding_idx, scale_grad_by_freq):
    """onehot(indices)^T @ grad: row w = fold(fma) over positions p in increasing order of
    [indices[p] == w] * grad[p], from +0. For finite gradients this is the sum of the grad
    rows at p with indices[p] == w in increasing p (fma(1, g, acc) rounds as acc + g; a 0
    term adds a zero, which never changes a sum started at +0); a non-finite gradient
    entry poisons its whole column (0 * inf = NaN)."""
    if scale_grad_by_freq:
        raise UnsupportedOpError("aten.embedding_dense_backward with scale_grad_by_freq=True")
    if padding_idx is not None and padding_idx >= 0:
        raise UnsupportedOpError("aten.embedding_dense_backward with a padding_idx")
    g = np_(grad, "embedding_dense_backward")
    idx = _indices(indices, num_weights, "embedding_dense_backward").reshape(-1)
    return tt(N.embedding_backward(idx, g.reshape(idx.size, -1), num_weights))


# -- RepOps' own operators (repops/ops.py) -------------------------------------------------------------
repops_ops = torch.ops.repops


@register(repops_ops.rms_norm.default)
def rms_norm(x, weight, eps):
    y, r = N.rms_norm(np_(x, "rms_norm"), np_(weight, "rms_norm"), eps)
    return tt(y), tt(r)


@register(repops_ops.rms_norm_backward.default)
def rms_norm_backward(grad, x, weight, r):
    op = "rms_norm_backward"
    dx, dw = N.rms_norm_backward(np_(grad, op), np_(x, op), np_(weight, op), np_(r, op))
    return tt(dx), tt(dw)


@register(repops_ops.attention.default)
def attention(q, k, v, mask, scale):
    m = None if mask is None else arr(mask).astype(np.bool_, copy=False)
    o, p = N.attention(np_(q, "attention"), np_(k, "attention"), np_(v, "attention"), m, scale)
    return tt(o), tt(p)


@register(repops_ops.attention_backward.default)
def attention_backward(grad, q, k, v, p, mask, scale):
    op = "attention_backward"
    m = None if mask is None else arr(mask).astype(np.bool_, copy=False)
    dq, dk, dv = N.attention_backward(np_(grad, op), np_(q, op), np_(k, op), np_(v, op), np_(p, op), m, scale)
    return tt(dq), tt(dk), tt(dv)


@register(repops_ops.adamw_.default)
def adamw_(param, grad, m, v, b1t, b2t, lr, beta1, beta2, eps, weight_decay):
    """In place: each updated tensor is written back by _inplace (its copy kernel)."""
    state = (param, m, v, b1t, b2t)
    new = RO.adamw(*(np_(t, "adamw_") for t in (param, grad, m, v, b1t, b2t)), lr, beta1, beta2, eps, weight_decay)
    for t, a in zip(state, new):
        _inplace(t, a)
    return None


# -- exact ops: data movement, views, creation, reads ---------------------------------------------------------------
EXACT = {
    aten.view.default, aten._unsafe_view.default, aten.reshape.default, aten.t.default, aten.transpose.int,
    aten.permute.default, aten.expand.default, aten.slice.Tensor, aten.select.int, aten.unbind.int,
    aten.split.Tensor, aten.split_with_sizes.default, aten.squeeze.dim, aten.unsqueeze.default,
    aten.detach.default, aten.alias.default, aten.lift_fresh.default, aten.clone.default, aten.contiguous.default,
    aten.copy_.default, aten._to_copy.default, aten.stack.default, aten.cat.default, aten.zeros_like.default,
    aten.ones_like.default, aten.empty_like.default, aten.zeros.default, aten.ones.default, aten.empty.memory_format,
    aten.full.default, aten.full_like.default, aten.fill_.Scalar, aten.zero_.default, aten.new_zeros.default,
    aten.new_ones.default, aten.new_empty.default, aten.new_empty_strided.default, aten.empty_strided.default,
    aten.slice_backward.default, aten.select_backward.default, aten.index_select.default,
    aten._local_scalar_dense.default, aten.arange.default, aten.arange.start, aten.arange.start_step,
    aten.triu.default, aten.tril.default, aten.flatten.using_ints, aten.unflatten.int, aten.as_strided.default,
    aten._reshape_alias.default, aten.view_as_real.default,
    aten.set_.source_Tensor, aten.resize_.default, aten.squeeze.default,
}
# Note: float arange (above) computes start + i*step in double then rounds once: IEEE
# arithmetic, no libm, so it is portable; with integral values it is exact.
