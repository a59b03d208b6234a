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

from . import faults, torch_checks
from . import ops as _ops  # noqa: F401  (defines torch.ops.repops.*)
from .errors import DTypeError, UnsupportedOpError
from .reference import integers as I
from .reference import conv_transpose as CT
from .reference import distance as RD
from .reference import linalg as RL
from .reference import math as M
from .reference import nn as N
from .reference import optim as RO
from .reference import pooling as RP
from .reference import prims as P
from .reference.fold import _dims, fold_dims, mean_dims, sum_dims

aten = torch.ops.aten
F32 = np.float32
_F32 = torch.float32


# -- tensor <-> numpy ----------------------------------------------------------------------------
def np_(t, op) -> np.ndarray:
    """A float32 view of a tensor argument (python numbers and 0-dim wrapped scalars become
    float32 scalars, rounded once from their double value; an integer or bool tensor on the
    host becomes its to_f32 kernel's output, nearest-even as numpy's cast)."""
    if isinstance(t, (int, float, bool)):
        return np.asarray(t, F32)
    if isinstance(t, complex):
        raise DTypeError(f"{op}: RepOps computes in float32 only; got the complex number {t!r}. {_COMPLEX}")
    if t.dtype is _F32:  # (the common case: dtypes are singletons)
        return arr(t)
    if t.dim() == 0 and t.dtype.is_floating_point:
        return np.asarray(t.item(), F32)
    if t.dtype.is_floating_point or t.dtype.is_complex:  # (a complex operand read as float32 keeps its real part)
        raise dtype_error(op, t.dtype, [t])
    a = arr(t)
    if P.xp_of(a) is np and I.dtype_name(a):  # an integer or bool operand of a float op: its to_f32
        return I.KERNELS[f"to_f32.{I.dtype_name(a)}"](a)  # kernel, so a dispute names the conversion
    return a


def dtype_error(op, dtype, args) -> DTypeError:
    """The one refusal of a float or complex dtype other than float32 (an operand's, or torch's result's)."""
    shapes = ", ".join(f"{t.dtype}{list(t.shape)}" for t in args if isinstance(t, torch.Tensor))
    if dtype.is_complex:
        return DTypeError(f"{op}: RepOps computes in float32 only; got a {dtype} tensor (operands: {shapes}). "
                          f"{_COMPLEX}")
    return DTypeError(f"{op}: RepOps computes in float32 only; got a {dtype} tensor (operands: {shapes}). Convert "
                      "the model and its inputs with .float() (a bf16/fp16 checkpoint loads into a float32 model), "
                      "and train without torch.autocast.")


_COMPLEX = ("Complex numbers (torch.fft, products of torch.polar, complex rotary embeddings) are outside RepOps' "
            "binary32 spec: keep real and imaginary parts as float32 tensors (rotary embeddings as cos/sin "
            "tables), or keep this op out of repops.deterministic().")


def arr(t: torch.Tensor):
    """The tensor's data as an array of its device: numpy or CuPy, a view of its memory."""
    if t.is_cuda:  # (no device object made: every operand of every op comes here)
        from .cuda.device import as_array
        return as_array(t)
    return t.detach().numpy()


def tensor(a) -> torch.Tensor:
    """An array as a torch tensor on the same memory, its dtype kept (integer and bool results)."""
    if P.xp_of(a) is np:
        return torch.from_numpy(np.asarray(a))
    from .cuda.device import as_tensor
    return as_tensor(a)


def tt(a) -> torch.Tensor:
    """A float result as a torch tensor (float32: a cast where a kernel gave integers or bools)."""
    if P.xp_of(a) is not np:
        return tensor(a.astype(F32, copy=False))
    a = np.asarray(a, dtype=F32)  # (np.ascontiguousarray would turn 0-d into 1-d)
    return torch.from_numpy(a if a.flags.c_contiguous and a.flags.writeable else a.copy())


def full(shape, v):
    return P.const(v, shape)


def registrar(table: dict):
    """A decorator factory filing a definition under each op it names, in `table`."""
    def register(*ops):
        def deco(fn):
            for op in ops:
                table[op] = fn
            return fn
        return deco
    return register


REGISTRY: dict = {}
register = registrar(REGISTRY)


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
    """aten binary op: prim(a, alpha * b) (the mul only when alpha != 1), but add/sub with an alpha
    as torch's CPU kernel computes them, fma(b, +-alpha, a): the same bits, and no overflow of
    alpha * b where the sum is finite; in-place variants copy the result back into a; reflected
    (rsub) swaps the operands."""
    def impl(a, b, alpha=1):
        x, y = np_(a, name), np_(b, name)
        if reflected:
            x, y = y, x
        if alpha != 1 and prim in (P.add, P.sub) and x.dtype == F32 and y.dtype == F32:
            r = P.fma(y, np_(alpha if prim is P.add else -alpha, name), x)
        else:
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


def _reciprocal(x):
    return P.div(full(x.shape, 1.0), x)


def _unary_inplace(fn, name):
    return lambda a: _inplace(a, fn(np_(a, name)))


# rsqrt(x) = 1 / sqrt(x): two correctly rounded primitives (no hardware rsqrt).
for _name, _fn in (("neg", P.neg), ("abs", P.abs_), ("sqrt", P.sqrt), ("rsqrt", _rsqrt), ("exp", M.exp), ("log", M.log),
                   ("tanh", M.tanh), ("sigmoid", M.sigmoid), ("sin", M.sin), ("cos", M.cos),
                   ("reciprocal", _reciprocal)):
    register(getattr(aten, _name).default)(_unary(_fn, _name))
    register(getattr(aten, _name + "_").default)(_unary_inplace(_fn, _name + "_"))


register(aten.erf.default)(_unary(M.erf, "erf"))
register(aten.erf_.default)(_unary_inplace(M.erf, "erf_"))
# (sign, sgn: repops/aten_nn.py, reference/activations.sign)


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
    from .reference.activations import pow as general  # any other exponent: exp(p log|x|) (repops/aten_nn.py)
    return tt(general(x, np.float32(p)))


_INT_CMP = {P.lt: np.less, P.le: np.less_equal, P.eq: np.equal}


def _compare(prim, swap=False, negate=False):
    def cmp(a, b):
        ints = not any(isinstance(v, torch.Tensor) and v.is_floating_point() or isinstance(v, float) for v in (a, b))
        x, y = (arr(v) if isinstance(v, torch.Tensor) else v for v in (a, b)) if ints else \
            (np_(a, "compare"), np_(b, "compare"))
        f = _INT_CMP[prim] if ints else prim  # integers compare exactly as integers
        r = f(y, x) if swap else f(x, y)
        r = ~r if negate else r
        return tensor(r)
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
    # torch's rule is x <= t ? 0 : g: a NaN x passes its gradient (lt(t, x) would zero it)
    return tt(P.select(P.le(x, full(x.shape, threshold)), full(g.shape, 0.0), g))


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


def _extremum(prim, name):
    """amax / amin: fold(max / min) from -inf / +inf over the dims (IEEE-2019: NaN wins, -0 < +0).
    An empty reduced dim has no extremum: torch raises, and so does RepOps."""
    def impl(a, dims=(), keepdim=False):
        x = np_(a, name)
        if x.size == 0 and any(x.shape[d] == 0 for d in _dims(x, dims)):
            raise UnsupportedOpError(f"aten.{name} over an empty dim of a {list(x.shape)} tensor: it has no value "
                                     "(torch raises too); reduce over non-empty dims")
        return tt(fold_dims(prim, x, dims, -np.inf if prim is P.max_ else np.inf, keepdim))
    return impl


register(aten.amax.default)(_extremum(P.max_, "amax"))
register(aten.amin.default)(_extremum(P.min_, "amin"))


@register(aten.var.correction, aten.var.dim)
def var(a, dims=None, *args, correction=None, keepdim=False, unbiased=None):
    """max(sum(d^2) - c (c / n), +0) / max(n - correction, 0) over the dims, d = x - mean, c = sum(d)
    (mean = sum / n; the sums fold in row-major order from -0): c (c / n) takes out what the
    mean's rounding adds to sum(d^2) (n delta^2: up to 1.6x the variance itself where the
    values spread over an ulp or two of the mean); sum(d^2) itself where it overflowed to inf;
    correction 1 by default, 0 when unbiased is False."""
    if args:  # aten.var.dim(self, dim, unbiased=True, keepdim=False)
        unbiased, *rest = args
        keepdim = rest[0] if rest else keepdim
    if correction is None:
        correction = 0 if unbiased is False else 1
    x = np_(a, "var")
    n = int(np.prod([x.shape[d] for d in _dims(x, dims)]))
    d = P.sub(x, mean_dims(x, dims, True))
    s = sum_dims(P.mul(d, d), dims, keepdim)
    c = sum_dims(d, dims, keepdim)
    corrected = P.max_(P.sub(s, P.mul(c, P.div(c, P.const(float(n), c.shape)))), P.const(0.0, s.shape))
    s = P.select(P.lt(s, P.const(np.inf, s.shape)), corrected, s)  # (squares overflowed: inf, not inf - inf)
    return tt(P.div(s, P.const(max(n - float(correction), 0.0), s.shape)))


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


def _indices(t, n: int, op: str, ignore=None, wrap=False):
    """An index tensor as int64 (a view when it already is one, so a decomposition sees a
    view of the op's input); an index outside [0, n) that is not `ignore` is a fault (rule
    `index`, repops/faults.py). wrap: torch's negative indices (x[idx], index_put), i + n
    for i in [-n, 0) by integer kernels (faults.wrap_negative); outside [-n, n) a fault."""
    if t.is_floating_point() or t.dtype == torch.bool:
        raise IndexError(f"{op}: indices must be an integer tensor, got {t.dtype} (a float index would be "
                         "truncated; convert it with .long() where that is meant)")
    i = arr(t)
    if i.dtype != np.int64:  # (an int32 index: a cast kernel, so the decomposition names it)
        i = I.KERNELS[f"to_i64.{I.dtype_name(i)}"](i) if P.xp_of(i) is np and I.dtype_name(i) else i.astype(np.int64)
    if wrap:
        given, i = i, faults.wrap_negative(i, n)
        faults.index_in_range(i, n, op, given=given)
        return i
    faults.index_in_range(i, n, op, ignore)
    return i


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


@register(aten.addmm.default, aten.baddbmm.default)
def addmm(bias, a, b, beta=1, alpha=1):
    """(a @ b) + bias; other scales: (a @ b) alpha + bias beta, and beta = 0 ignores bias
    (torch: NaN there does not propagate)."""
    if alpha == 1 and beta == 1:
        return tt(RL.matmul_add(np_(a, "addmm"), np_(b, "addmm"), np_(bias, "addmm")))
    mm = RL.matmul(np_(a, "addmm"), np_(b, "addmm"))
    if alpha != 1:
        mm = P.mul(mm, np.float32(alpha))
    if beta == 0:
        return tt(mm)
    c = np_(bias, "addmm")
    return tt(P.add(mm, c if beta == 1 else P.mul(c, np.float32(beta))))


@register(aten.embedding.default)
def embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    """Rows of weight picked by the gather kernel (an index outside the table is an error)."""
    w = np_(weight, "embedding")
    t = _indices(indices, w.shape[0], "embedding")
    out = P.gather(w.reshape(1, *w.shape), t.reshape(1, t.size), P.const(0.0, ()))
    return tt(out.reshape(*t.shape, w.shape[1]))


def summed_rows(idx, g, n: int, op: str):
    """N.embedding_backward (row w = the rows g[p] with idx[p] == w summed in increasing p, from
    +0, as one fixed-order one-hot matmul) behind the rule that keeps it torch's: a non-finite
    g[p, d] would be NaN in every other row (0 · inf), where torch adds it to its own row only,
    so it is a fault claim (rule `domain`), never that silent difference."""
    faults.finite(g, op, "and summing it through the one-hot product would spread NaN into rows it does not belong "
                         "to (torch adds it to its own row only): the step's gradients or sources have overflowed")
    return N.embedding_backward(idx, g, n)


@register(aten.embedding_dense_backward.default)
def embedding_backward(grad, indices, num_weights, padding_idx, scale_grad_by_freq):
    """onehot(indices)^T @ grad: row w = fold(fma) over positions p in increasing order of
    [indices[p] == w] * grad[p], from +0. For finite gradients this is the sum of the grad
    rows at p with indices[p] == w in increasing p (fma(1, g, acc) rounds as acc + g; a 0
    term adds a zero, which never changes a sum started at +0); a non-finite gradient
    entry is a fault claim (summed_rows)."""
    if scale_grad_by_freq:
        raise UnsupportedOpError("aten.embedding_dense_backward with scale_grad_by_freq=True")
    g = np_(grad, "embedding_dense_backward")
    idx = _indices(indices, num_weights, "embedding_dense_backward").reshape(-1)
    out = summed_rows(idx, g.reshape(idx.size, g.shape[-1]), num_weights, "embedding_dense_backward")
    if padding_idx is not None and 0 <= padding_idx < num_weights:  # the padding row's gradient is +0
        out = P.place(out.shape, 0, [(padding_idx, 1, P.const(0.0, (1, out.shape[1]))), (0, 1, out)])
    return tt(out)


# -- data movement of float tensors, as kernels a referee can follow (integers run natively) ----------------
def _result(a):
    """An array as an op's result: a kernel's output stays itself, a strided view becomes a
    copy kernel's output (so the result is described as a kernel output, never materialised)."""
    own = a.flags.c_contiguous and getattr(a.flags, "writeable", True)  # (CuPy has no read-only views)
    return tt(a if own else P.copy(a))


def _scalar_as_vector(result_like=0):
    """torch takes a 0-dim tensor where an op has a dim (0 or -1) as a 1-element vector: so
    does RepOps (every 0-dim tensor argument as shape (1,)), and the result gets torch's shape
    back (that of argument `result_like`: self, or gather's index)."""
    def deco(fn):
        def run(*args, **kwargs):
            if args[0].dim():
                return fn(*args, **kwargs)
            one = lambda t: t.reshape(1) if isinstance(t, torch.Tensor) and t.dim() == 0 else t  # noqa: E731
            out = fn(*map(one, args), **{k: one(v) for k, v in kwargs.items()})
            return out.reshape(args[result_like].shape)
        run.__name__, run.__doc__ = fn.__name__, fn.__doc__
        return run
    return deco


@register(aten.flip.default)
def flip(a, dims):
    return tt(P.copy(np.flip(np_(a, "flip"), tuple(dims))))


@register(aten.roll.default)
@_scalar_as_vector()
def roll(a, shifts, dims=()):
    x = np_(a, "roll")
    shape, placed = x.shape, False
    if not dims:
        x, dims = x.reshape(-1), [0]
    for shift, d in zip(shifts, dims):
        n = x.shape[d]
        k = shift % n if n else 0
        if k:
            at = lambda lo, hi: x[(slice(None),) * (d % x.ndim) + (slice(lo, hi),)]  # noqa: E731
            x, placed = P.place(x.shape, d % x.ndim, [(0, 1, at(n - k, n)), (k, 1, at(0, n - k))]), True
    return _result(x.reshape(shape)) if placed else tt(P.copy(x.reshape(shape)))  # never the input itself


@register(aten.repeat.default)
def repeat(a, repeats):
    x = np_(a, "repeat")
    x = x.reshape((1,) * (len(repeats) - x.ndim) + x.shape)
    tiled = np.broadcast_to(x.reshape(sum(((1, n) for n in x.shape), ())),
                            sum(((r, n) for r, n in zip(repeats, x.shape)), ()))
    return tt(P.copy(tiled).reshape([r * n for r, n in zip(repeats, x.shape)]))


@register(aten.constant_pad_nd.default)
def constant_pad_nd(a, pad, value=0):
    """F.pad(mode='constant'): negative amounts crop (a view), positive ones pad (place)."""
    x = np_(a, "constant_pad_nd")
    pads, crop = {}, [slice(None)] * x.ndim
    for i in range(len(pad) // 2):
        d, lo, hi = x.ndim - 1 - i, pad[2 * i], pad[2 * i + 1]
        crop[d] = slice(max(-lo, 0), x.shape[d] - max(-hi, 0))
        pads[d] = (max(lo, 0), max(hi, 0))
    if not any(lo or hi for lo, hi in pads.values()):
        return tt(P.copy(x[tuple(crop)]))  # a crop only (the backward of a pad)
    return tt(P.pad(x[tuple(crop)], pads, value))


@register(aten.slice_scatter.default)
def slice_scatter(a, src, dim=0, start=None, end=None, step=1):
    x, v = np_(a, "slice_scatter"), np_(src, "slice_scatter")
    dim %= x.ndim
    first = range(x.shape[dim])[slice(start, end, step)]
    if not len(first):
        return tt(P.copy(x))
    return tt(P.place(x.shape, dim, [(first.start, step, v), (0, 1, x)]))


@register(aten.select_scatter.default)
def select_scatter(a, src, dim, index):
    x = np_(a, "select_scatter")
    dim %= x.ndim
    if not -x.shape[dim] <= index < x.shape[dim]:  # (torch's rule; index % n would write another row)
        raise IndexError(f"select_scatter: index {index} is outside [-{x.shape[dim]}, {x.shape[dim]}) for dim {dim}")
    v = np.expand_dims(np_(src, "select_scatter"), dim)
    return tt(P.place(x.shape, dim, [(index % x.shape[dim], 1, v), (0, 1, x)]))


def _gather_along(x, dim, idx):
    """x's slices at integer positions idx (1-D) along dim, by the gather kernel."""
    dim %= x.ndim
    lead, n, inner = int(np.prod(x.shape[:dim])), x.shape[dim], int(np.prod(x.shape[dim + 1:]))
    data = (x if x.flags.c_contiguous else P.copy(x)).reshape(lead, n, inner)  # (no -1: ambiguous when empty)
    out = P.gather(data, np.broadcast_to(idx.reshape(1, -1), (lead, idx.size)), P.const(0.0, ()))
    return out.reshape(x.shape[:dim] + idx.shape + x.shape[dim + 1:])


@register(aten.index_select.default)
@_scalar_as_vector()
def index_select(a, dim, index):
    x = np_(a, "index_select")
    return tt(_gather_along(x, dim, _indices(index, x.shape[dim % x.ndim], "index_select").reshape(-1)))


def _accumulate(x, d, idx, v, op: str = "index_add"):
    """x + (v's slices along axis d summed into x's slices idx, each in increasing position
    order: embedding_backward's fixed-order rule; an untouched slice adds +0)."""
    xm = np.moveaxis(x, d, 0)
    vm = P.copy(np.moveaxis(v, d, 0)).reshape(idx.size, int(np.prod(xm.shape[1:])))
    add = summed_rows(idx, vm, x.shape[d], op).reshape(xm.shape)
    return np.moveaxis(P.add(xm, add), 0, d)


@register(aten.index_add.default)
@_scalar_as_vector()
def index_add(a, dim, index, source, alpha=1):
    """x.index_add(dim, idx, source) (index_select's backward): source's slices summed into x."""
    x = np_(a, "index_add")
    dim %= x.ndim
    v = np_(source, "index_add")
    v = v if alpha == 1 else P.mul(v, np.float32(alpha))
    return _result(_accumulate(x, dim, _indices(index, x.shape[dim], "index_add").reshape(-1), v))


# -- more elementwise and reductions (torch.nn models, Hugging Face families) ---------------------------------
@register(aten.where.self)
def where(cond, a, b):
    """select(cond, a, b) (NaN canonical); integer operands run natively (exact)."""
    return tt(P.select(arr(cond).astype(np.bool_, copy=False), np_(a, "where"), np_(b, "where")))


register(aten.minimum.default)(lambda a, b: tt(P.min_(np_(a, "minimum"), np_(b, "minimum"))))
register(aten.maximum.default)(lambda a, b: tt(P.max_(np_(a, "maximum"), np_(b, "maximum"))))


def _clamp(x, lo, hi):
    """max(x, lo) then min(., hi) (IEEE-2019: NaN stays NaN), as torch.clamp."""
    if lo is not None:
        x = P.max_(x, np_(lo, "clamp"))
    if hi is not None:
        x = P.min_(x, np_(hi, "clamp"))
    return x


register(aten.clamp.default, aten.clamp.Tensor)(lambda a, lo=None, hi=None: tt(_clamp(np_(a, "clamp"), lo, hi)))
register(aten.clamp_min.default)(lambda a, lo: tt(_clamp(np_(a, "clamp_min"), lo, None)))
register(aten.clamp_max.default)(lambda a, hi: tt(_clamp(np_(a, "clamp_max"), None, hi)))
register(aten.clamp_.default)(lambda a, lo=None, hi=None: _inplace(a, _clamp(np_(a, "clamp_"), lo, hi)))


@register(aten.linalg_vector_norm.default)
def vector_norm(a, ord=2, dims=None, keepdim=False, dtype=None):
    """Every ord (reference/distance.py): 2, 1, inf, -inf, 0 and the general p."""
    _result_dtype("linalg_vector_norm", dtype)
    return tt(RD.vector_norm(np_(a, "linalg_vector_norm"), float(ord), dims, keepdim))


@register(aten._safe_softmax.default)
def safe_softmax(a, dim, dtype=None):
    """softmax, with +0 for a row whose maximum is -inf (every entry masked)."""
    _result_dtype("_safe_softmax", dtype)
    x = np_(a, "_safe_softmax")
    m = fold_dims(P.max_, x, [dim], -np.inf, True)
    return tt(P.select(P.eq(m, np.float32(-np.inf)), P.const(0.0, x.shape), N.softmax(x, dim)))


def take_along(x, dim, i, copy, gather, fill):
    """torch.gather's element rule, out[..., j, ...] = x[..., i[..., j, ...], ...] along dim, as
    one gather kernel: dim moved last, rows = every other index position; x's part and, when
    moving the dim left it strided, i by copy kernels (`copy`: of x's dtype), so every
    operand is a kernel output or a view (a reshape that copies would leave an operand no
    descriptor names)."""
    from .reference.integers import KERNELS
    dim %= x.ndim
    lead = tuple(slice(0, n) for n in i.shape)
    xs = np.moveaxis(x[lead[:dim] + (slice(None),) + lead[dim + 1:]], dim, -1)
    im = np.moveaxis(i, dim, -1)
    rows = int(np.prod(im.shape[:-1]))
    data = copy(xs).reshape(rows, xs.shape[-1], 1)
    if not im.flags.c_contiguous and P.xp_of(im) is np:  # (on a device no decomposition is observed)
        im = KERNELS["copy.i64"](im)
    idx = im.reshape(rows, im.shape[-1])
    return np.moveaxis(gather(data, idx, fill).reshape(im.shape), -1, dim)


@register(aten.gather.default)
@_scalar_as_vector(2)
def gather(a, dim, index, sparse_grad=False):
    """torch.gather of float data, by the gather kernel (take_along). An empty index gives an
    empty result of its shape (torch checks no other shape then: x[5] with index [2, 0])."""
    x = np_(a, "gather")
    if index.numel() == 0:
        return torch.empty(tuple(index.shape), dtype=torch.float32, device=a.device)
    i = _indices(index, x.shape[dim % x.ndim], "gather")
    return _result(take_along(x, dim, i, P.copy, P.gather, P.const(0.0, ())))


def _conv_args(op, stride, padding, dilation, nd):
    if isinstance(padding, str):
        raise UnsupportedOpError(f"{op}: padding={padding!r}; give the padding in numbers")
    return N.per_axis(stride, nd), N.per_axis(padding, nd), N.per_axis(dilation, nd)


def _conv_checks(x, w, b, stride, padding, dilation, transposed, output_padding, groups):
    """torch's checks of a convolution's arguments (in its kernel, which RepOps replaces; its
    meta function checks only the output size, run last): RepOps raises where torch does."""
    op = "aten.convolution"
    nd = x.dim() - 2
    cin = w.shape[0] if transposed else w.shape[1] * groups
    cout = w.shape[1] * groups if transposed else w.shape[0]
    bad = (f"weight {list(w.shape)} for input {list(x.shape)}: {nd + 2}-d weight expected" if w.dim() != x.dim() or nd < 1
           else f"groups={groups}" if groups < 1 or w.shape[0] % groups
           else f"input {list(x.shape)} has {x.shape[1]} channels, the weight {list(w.shape)} takes {cin}"
           if x.shape[1] != cin
           else f"bias of {list(b.shape)} for {cout} output channels" if b is not None and list(b.shape) != [cout]
           else f"padding={list(padding)}: negative" if min(padding) < 0
           else f"stride={list(stride)}, dilation={list(dilation)}: each > 0" if min(stride) < 1 or min(dilation) < 1
           else f"output_padding={list(output_padding)}: each in [0, max(stride, dilation))" if transposed and any(
               not 0 <= o < max(s, d) for o, s, d in zip(output_padding, stride, dilation)) else "")
    if bad:
        raise UnsupportedOpError(f"{op}: {bad} (torch raises too)")
    torch_checks.check(aten.convolution.default, (x, w, b, stride, padding, dilation, transposed, output_padding,
                                                  groups))


@register(aten.convolution.default)
def convolution(x, w, b, stride, padding, dilation, transposed, output_padding, groups):
    """transposed=True: ConvTranspose, as convolution's input gradient (reference/conv_transpose.py)."""
    nd = x.dim() - 2
    stride, padding, dilation = _conv_args("aten.convolution", stride, padding, dilation, nd)
    output_padding = N.per_axis(output_padding, nd)
    _conv_checks(x, w, b, stride, padding, dilation, transposed, output_padding, groups)
    op = "convolution"
    xa, wa, ba = np_(x, op), np_(w, op), None if b is None else np_(b, op)
    if transposed:
        return tt(CT.conv_transpose(xa, wa, ba, stride, padding, output_padding, dilation, groups))
    return tt(N.conv(xa, wa, ba, stride, padding, dilation, groups))


@register(aten.convolution_backward.default)
def convolution_backward(g, x, w, bias_sizes, stride, padding, dilation, transposed, output_padding, groups, mask):
    nd = x.dim() - 2
    stride, padding, dilation = _conv_args("aten.convolution_backward", stride, padding, dilation, nd)
    op = "convolution_backward"
    backward = CT.conv_transpose_backward if transposed else N.conv_backward
    dx, dw, db = backward(np_(g, op), np_(x, op), np_(w, op), stride, padding, dilation, groups, mask)
    return tuple(None if t is None else tt(t) for t in (dx, dw, db))


@register(aten.native_batch_norm.default)
def native_batch_norm(x, weight, bias, running_mean, running_var, training, momentum, eps):
    """Training: batch statistics (reference/nn.py batch_norm); the running statistics are
    updated in place: r = (1 - momentum) r + momentum s (s: the mean, and the variance times
    count / (count - 1)). Evaluation: the running statistics normalise."""
    op = "native_batch_norm"
    xa = np_(x, op)
    w = None if weight is None else np_(weight, op)
    b = None if bias is None else np_(bias, op)
    if not training:
        y = N.batch_norm_frozen(xa, w, b, np_(running_mean, op), np_(running_var, op), eps)
        return tt(y), x.new_empty(0), x.new_empty(0)  # no statistics saved, on x's device
    y, mean, invstd, var = N.batch_norm(xa, w, b, eps)
    count = xa.size // xa.shape[1]
    if running_mean is not None:
        m = np.float32(momentum)
        _inplace(running_mean, P.add(P.mul(np_(running_mean, op), np.float32(1.0 - momentum)), P.mul(mean, m)))
    if running_var is not None:
        unbiased = P.mul(var, np.float32(count / max(count - 1, 1)))
        _inplace(running_var, P.add(P.mul(np_(running_var, op), np.float32(1.0 - momentum)),
                                    P.mul(unbiased, np.float32(momentum))))
    return tt(y), tt(mean), tt(invstd)


@register(aten.native_batch_norm_backward.default)
def native_batch_norm_backward(go, x, weight, running_mean, running_var, save_mean, save_invstd, train, eps, mask):
    op = "native_batch_norm_backward"
    w = None if weight is None else np_(weight, op)
    if not train:
        dx, dw, db = N.batch_norm_frozen_backward(np_(go, op), np_(x, op), w, np_(running_mean, op),
                                                  np_(running_var, op), eps, mask)
    else:
        dx, dw, db = N.batch_norm_backward(np_(go, op), np_(x, op), w, np_(save_mean, op), np_(save_invstd, op), mask)
    return tuple(None if t is None else tt(t) for t in (dx, dw, db))


@register(aten.native_group_norm.default)
def native_group_norm(x, weight, bias, n, c, hw, group, eps):
    """Per (sample, group): layer norm over the group's channels and positions; then the
    per-channel affine."""
    op = "native_group_norm"
    xa = np_(x, op)  # (explicit sizes below: -1 is ambiguous when a size is 0)
    y, mean, rstd = N.layer_norm(xa.reshape(n, group, c // group * hw), None, None, eps, 1)
    y = y.reshape(n, c, hw)
    if weight is not None:
        y = P.mul(y, np_(weight, op).reshape(c, 1))
    if bias is not None:
        y = P.add(y, np_(bias, op).reshape(c, 1))
    return tt(y.reshape(xa.shape)), tt(mean.reshape(n, group)), tt(rstd.reshape(n, group))


@register(aten.native_group_norm_backward.default)
def native_group_norm_backward(go, x, mean, rstd, weight, n, c, hw, group, mask):
    op = "native_group_norm_backward"
    g, xa = np_(go, op).reshape(n, c, hw), np_(x, op)  # (explicit sizes: -1 is ambiguous when one is 0)
    w = None if weight is None else np_(weight, op).reshape(c, 1)
    gw = g if w is None else P.mul(g, w)
    xg = xa.reshape(n, group, c // group * hw)
    mean_, rstd_ = np_(mean, op).reshape(n, group, 1), np_(rstd, op).reshape(n, group, 1)
    dx, _, _ = N.layer_norm_backward(gw.reshape(xg.shape), xg, mean_, rstd_, None, 1, False, False)
    xhat = P.mul(P.sub(xg, mean_), rstd_).reshape(n, c, hw)
    dw = sum_dims(P.mul(g, xhat), [0, 2]) if (mask[1] and weight is not None) else None
    db = sum_dims(g, [0, 2]) if mask[2] else None
    return (tt(dx.reshape(xa.shape)) if mask[0] else None), (None if dw is None else tt(dw)), (None if db is None else tt(db))


def _pool_args(nd, kernel, stride, padding):
    kernel = N.per_axis(kernel, nd)
    return kernel, (N.per_axis(stride, nd) if stride else kernel), N.per_axis(padding, nd)


def _batched(a, nd, op):
    """A pooling operand as [N, C, *S] (the reference's layout): an unbatched one ([C, *S],
    which torch accepts) as a batch of one; _unbatched undoes it on the result."""
    x = np_(a, op)
    return x.reshape((1,) + x.shape) if x.ndim == nd + 1 else x


def _unbatched(y, a, nd):
    return tt(y.reshape(y.shape[1:]) if a.dim() == nd + 1 else y)


def _avg_pool(nd):
    def avg_pool(x, kernel, stride=(), padding=(0,), ceil_mode=False, count_include_pad=True, divisor_override=None):
        k, st, pad = _pool_args(nd, kernel, stride, padding)
        return _unbatched(N.avg_pool(_batched(x, nd, "avg_pool"), k, st, pad, ceil_mode, count_include_pad,
                                     divisor_override), x, nd)
    return avg_pool


def _avg_pool_backward(nd):
    def avg_pool_backward(g, x, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override):
        k, st, pad = _pool_args(nd, kernel, stride, padding)
        op = "avg_pool_backward"
        return _unbatched(N.avg_pool_backward(_batched(g, nd, op), _batched(x, nd, op), k, st, pad, ceil_mode,
                                              count_include_pad, divisor_override), x, nd)
    return avg_pool_backward


for _nd in (2, 3):
    register(getattr(aten, f"avg_pool{_nd}d").default)(_avg_pool(_nd))
    register(getattr(aten, f"avg_pool{_nd}d_backward").default)(_avg_pool_backward(_nd))


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


@register(repops_ops.rope.default)
def rope(x, cos, sin):
    return tt(N.rope(np_(x, "rope"), np_(cos, "rope"), np_(sin, "rope")))


@register(repops_ops.rope_backward.default)
def rope_backward(grad, cos, sin):
    op = "rope_backward"
    return tt(N.rope_backward(np_(grad, op), np_(cos, op), np_(sin, op)))


@register(repops_ops.attention.default)
def attention(q, k, v, mask, scale, bias=None):
    m = None if mask is None else arr(mask).astype(np.bool_, copy=False)
    b = None if bias is None else np_(bias, "attention")
    o, p = N.attention(np_(q, "attention"), np_(k, "attention"), np_(v, "attention"), m, scale, b)
    return tt(o), tt(p)


@register(repops_ops.attention_backward.default)
def attention_backward(grad, q, k, v, p, mask, scale):
    op = "attention_backward"
    m = None if mask is None else arr(mask).astype(np.bool_, copy=False)
    dq, dk, dv = N.attention_backward(np_(grad, op), np_(q, op), np_(k, op), np_(v, op), np_(p, op), m, scale)
    return tt(dq), tt(dk), tt(dv)


@register(repops_ops.max_pool.default)
def max_pool(x, kernel, stride, padding, dilation, ceil_mode):
    return tt(N.max_pool(np_(x, "max_pool"), kernel, stride, padding, dilation, ceil_mode))


@register(repops_ops.max_pool_backward.default)
def max_pool_backward(grad, x, out, kernel, stride, padding, dilation, ceil_mode):
    op = "max_pool_backward"
    return tt(RP.max_pool_backward(np_(grad, op), np_(x, op), np_(out, op), kernel, stride, padding, dilation, ceil_mode))


@register(repops_ops.dropout.default)
def dropout(x, step, seed, stream, p):
    y, m = N.dropout(np_(x, "dropout"), np_(step, "dropout"), seed, stream, p)
    return tt(y), tt(m)


@register(repops_ops.adamw_.default)
def adamw_(param, grad, m, v, b1t, b2t, lr, beta1, beta2, eps, weight_decay):
    """In place: each updated tensor is written back by _inplace (its copy kernel)."""
    state = (param, m, v, b1t, b2t)
    new = RO.adamw(*(np_(t, "adamw_") for t in (param, grad, m, v, b1t, b2t)), lr, beta1, beta2, eps, weight_decay)
    for t, a in zip(state, new):
        _inplace(t, a)
    return None


@register(repops_ops.adamw_foreach_.default)
def adamw_foreach_(params, grads, m, v, b1t, b2t, lr, beta1, beta2, eps, weight_decay):
    """Untraced only (a trace records adamw_ per parameter: PER_TENSOR)."""
    arrays = [[np_(t, "adamw_") for t in ts] for ts in (params, grads, m, v, b1t, b2t)]
    new = RO.adamw_foreach(*arrays, lr, beta1, beta2, eps, weight_decay)
    written = zip(*(arrays[k] for k in (0, 2, 3, 4, 5)))
    for state, mine, values in zip(zip(params, m, v, b1t, b2t), written, new):
        for t, d, a in zip(state, mine, values):
            if a is d:  # the kernel wrote the tensor's own memory (the CUDA backend's): no copy back
                P.wrote(d, a)
            else:
                _inplace(t, a)
    return None


# Group ops a trace records as their single-tensor op on each i-th element (the protocol's
# graph has one node per parameter); repops/mode.py runs them so whenever a trace is on.
PER_TENSOR = {repops_ops.adamw_foreach_.default: repops_ops.adamw_.default}


# -- exact ops: data movement, views, creation, reads ---------------------------------------------------------------
EXACT = {
    aten.view.default, aten._unsafe_view.default, aten.reshape.default, aten.t.default, aten.transpose.int,
    aten.permute.default, aten.expand.default, aten.slice.Tensor, aten.select.int, aten.unbind.int,
    aten.split.Tensor, aten.split_with_sizes.default, aten.squeeze.dim, aten.unsqueeze.default,
    aten.detach.default, aten.alias.default, aten.lift_fresh.default, aten.clone.default, aten.contiguous.default,
    aten.copy_.default, aten.copy.default, aten._to_copy.default, aten.stack.default, aten.cat.default, aten.zeros_like.default,
    aten.ones_like.default, aten.empty_like.default, aten.zeros.default, aten.ones.default, aten.empty.memory_format,
    aten.full.default, aten.full_like.default, aten.fill_.Scalar, aten.zero_.default, aten.new_zeros.default,
    aten.new_ones.default, aten.new_empty.default, aten.new_empty_strided.default, aten.empty_strided.default,
    aten.slice_backward.default, aten.select_backward.default, aten._local_scalar_dense.default,
    aten.arange.default, aten.arange.start, aten.arange.start_step,
    aten.triu.default, aten.tril.default, aten.flatten.using_ints, aten.unflatten.int, aten.as_strided.default,
    aten._reshape_alias.default, aten.view_as_real.default,
    aten.set_.source_Tensor, aten.resize_.default, aten.squeeze.default,
    aten.scalar_tensor.default, aten.fill_.Tensor, aten.view.dtype, aten.new_full.default, aten.lift_fresh_copy.default,
    aten.masked_select.default, aten.squeeze.dims, aten.unsqueeze_copy.default,
    aten.expand_copy.default, aten.permute_copy.default, aten.view_copy.default, aten.t_copy.default,
    aten.transpose_copy.int, aten.unsafe_split.Tensor, aten.unsafe_split_with_sizes.default, aten.chunk.default,
    aten._assert_tensor_metadata.default, aten.sym_constrain_range_for_size.default,
}
# torch's questions about which vendor library an op should take: answered "none", so torch's
# composite takes the path the CPU takes (ctc_loss asks on CUDA only, cuDNN then MIOpen: yes meant
# _cudnn_ctc_loss, which RepOps refuses; no is _ctc_loss, RepOps' own; found on the H200). Never a node: a CPU
# trace has no such question, and a GPU trainer's trace must be the CPU's.
LIBRARY_CHOICES = {op: False for op in (aten._use_cudnn_ctc_loss.default, aten._use_cudnn_ctc_loss.Tensor,
                                          aten._use_miopen_ctc_loss.default, aten._use_miopen_ctc_loss.Tensor)}
# Aliases: the same tensor under another name, no node in a trace (the recorder binds the
# alias to its source, `trace.alias`). Autograd issues detach depending on reference counts
# (AccumulateGrad steals a gradient with detach only when nothing else holds it; a seed made
# while the loss is held elsewhere is detached first): a trace that recorded them would
# depend on who else in the process (a debugger, a profiler, a kept traceback) holds a tensor.
ALIASES = {aten.detach.default}
# Creation without values: RepOps gives them +0 (zeros), so that no node's output is whatever
# the allocator left (autograd makes a gradient with a parameter's strides by new_empty_strided
# then copy_; two honest trainers would commit different garbage).
EMPTY = {aten.empty_like.default, aten.empty.memory_format, aten.new_empty.default, aten.new_empty_strided.default,
         aten.empty_strided.default}
# Note: float arange (above) computes start + i*step in double then rounds once: IEEE
# arithmetic, no libm, so it is portable; with integral values it is exact.
