"""Neural-network operators as compositions of the primitives (docs/NUMERICS.md §8): THE
spec of each fused kernel. Every function here is overridable: a backend replaces it by one
kernel that computes, element by element, this very sequence (the per-element parts shared by
both compiled backends live in repops/kernels/elementwise.h), and the tests compare them bit
for bit. Level 3 of a dispute decomposes an operator by running these compositions.

Row operators work along the LAST axis (aten.py moves another axis there, an exact copy)."""
from __future__ import annotations

import numpy as np

from . import math as M
from . import prims as P
from .fold import max_dims, mean_dims, sum_dims
from .linalg import matmul

F32 = np.float32
SQRT1_2 = M.c(0x3F3504F3)           # RN(1/sqrt 2)
INV_SQRT_2PI = M.c(0x3ECC422A)      # RN(1/sqrt(2 pi))
SQRT_2_OVER_PI = M.c(0x3F4C422A)    # RN(sqrt(2/pi))
GELU_KAPPA = M.c(0x3D372713)        # RN(0.044715)
GELU_3KAPPA = M.c(0x3E095D4F)       # RN(3 * 0.044715)


def _c(value, like):
    """A constant operand at the shape of `like` (a stride-0 broadcast)."""
    return P.const(value, np.shape(like))


# -- activations ------------------------------------------------------------------------------------
@P.overridable("silu")
def silu(x):
    """x sigmoid(x)."""
    return P.mul(x, M.sigmoid(x))


@P.overridable("silu_backward")
def silu_backward(g, x):
    """g (s (1 + x (1 - s))), s = sigmoid(x)."""
    s, one = M.sigmoid(x), _c(1.0, x)
    return P.mul(g, P.mul(s, P.add(one, P.mul(x, P.sub(one, s)))))


@P.overridable("gelu")
def gelu(x):
    """(0.5 x) (1 + erf(x RN(1/sqrt2)))."""
    e = M.erf(P.mul(x, _c(SQRT1_2, x)))
    return P.mul(P.mul(_c(0.5, x), x), P.add(_c(1.0, x), e))


@P.overridable("gelu_backward")
def gelu_backward(g, x):
    """g (cdf + x pdf): cdf = 0.5 (1 + erf(x/sqrt2)), pdf = exp(-0.5 x^2) RN(1/sqrt(2 pi))."""
    cdf = P.mul(_c(0.5, x), P.add(_c(1.0, x), M.erf(P.mul(x, _c(SQRT1_2, x)))))
    pdf = P.mul(M.exp(P.mul(_c(-0.5, x), P.mul(x, x))), _c(INV_SQRT_2PI, x))
    return P.mul(g, P.add(cdf, P.mul(x, pdf)))


@P.overridable("gelu_tanh")
def gelu_tanh(x):
    """(0.5 x) (1 + tanh(RN(sqrt(2/pi)) (x + RN(0.044715) ((x x) x))))."""
    u = P.mul(_c(SQRT_2_OVER_PI, x), P.add(x, P.mul(_c(GELU_KAPPA, x), P.mul(P.mul(x, x), x))))
    return P.mul(P.mul(_c(0.5, x), x), P.add(_c(1.0, x), M.tanh(u)))


@P.overridable("gelu_tanh_backward")
def gelu_tanh_backward(g, x):
    """t = tanh(u) as in gelu_tanh; g (0.5 (1 + t) + (((0.5 x)(1 - t t)) RN(sqrt(2/pi)))
    (1 + RN(3 * 0.044715) x^2))."""
    x2 = P.mul(x, x)
    t = M.tanh(P.mul(_c(SQRT_2_OVER_PI, x), P.add(x, P.mul(_c(GELU_KAPPA, x), P.mul(x2, x)))))
    left = P.mul(_c(0.5, x), P.add(_c(1.0, x), t))
    right = P.mul(P.mul(P.mul(P.mul(_c(0.5, x), x), P.sub(_c(1.0, x), P.mul(t, t))), _c(SQRT_2_OVER_PI, x)),
                  P.add(_c(1.0, x), P.mul(_c(GELU_3KAPPA, x), x2)))
    return P.mul(g, P.add(left, right))


@P.overridable("tanh_backward")
def tanh_backward(g, y):
    """g (1 - y y)."""
    return P.mul(g, P.sub(_c(1.0, y), P.mul(y, y)))


@P.overridable("sigmoid_backward")
def sigmoid_backward(g, y):
    """g (y (1 - y))."""
    return P.mul(g, P.mul(y, P.sub(_c(1.0, y), y)))


# -- softmax family (along one axis, `dim`) ---------------------------------------------------------------
@P.overridable("softmax")
def softmax(x, dim):
    """e = exp(x - max), e / sum(e); max folds from -inf, sum from -0."""
    e = M.exp(P.sub(x, max_dims(x, [dim], True)))
    return P.div(e, sum_dims(e, [dim], True))


@P.overridable("softmax_backward")
def softmax_backward(g, y, dim):
    """y (g - sum(g y))."""
    return P.mul(y, P.sub(g, sum_dims(P.mul(g, y), [dim], True)))


@P.overridable("log_softmax")
def log_softmax(x, dim):
    """(x - max) - log(sum(exp(x - max)))."""
    sh = P.sub(x, max_dims(x, [dim], True))
    return P.sub(sh, M.log(sum_dims(M.exp(sh), [dim], True)))


@P.overridable("log_softmax_backward")
def log_softmax_backward(g, y, dim):
    """g - exp(y) sum(g)."""
    return P.sub(g, P.mul(M.exp(y), sum_dims(g, [dim], True)))


# -- normalisation over the trailing `nd` axes ---------------------------------------------------------------
def _trailing(x, nd):
    return list(range(x.ndim - nd, x.ndim)), list(range(x.ndim - nd))


@P.overridable("layer_norm")
def layer_norm(x, w, b, eps, nd):
    """mean = sum/n; d = x - mean; var = sum(d d)/n; rstd = 1/sqrt(var + eps);
    y = ((d rstd) w) + b (w, b may be None). -> (y, mean, rstd), mean and rstd keepdim."""
    dims, _ = _trailing(x, nd)
    mean = mean_dims(x, dims, True)
    d = P.sub(x, mean)
    var = mean_dims(P.mul(d, d), dims, True)
    rstd = P.div(P.const(1.0, var.shape), P.sqrt(P.add(var, P.const(eps, var.shape))))
    y = P.mul(d, rstd)
    if w is not None:
        y = P.mul(y, w)
    if b is not None:
        y = P.add(y, b)
    return y, mean, rstd


@P.overridable("layer_norm_backward")
def layer_norm_backward(go, x, mean, rstd, w, nd, want_dw, want_db):
    """xhat = (x - mean) rstd; g = go w; dx = rstd ((g - mean(g)) - xhat mean(g xhat));
    dw = sum over the leading axes of go xhat, db = of go (row-major order). -> (dx, dw, db)."""
    dims, rows = _trailing(x, nd)
    xhat = P.mul(P.sub(x, mean), rstd)
    g = P.mul(go, w) if w is not None else go
    dx = P.mul(rstd, P.sub(P.sub(g, mean_dims(g, dims, True)), P.mul(xhat, mean_dims(P.mul(g, xhat), dims, True))))
    dw = sum_dims(P.mul(go, xhat), rows) if want_dw else None
    db = sum_dims(go, rows) if want_db else None
    return dx, dw, db


# -- RepOps' own operators (repops/ops.py): each spec is what autograd computed for the plain
#    composition they replace in RepOps' models, step for step, so their bits are unchanged --
@P.overridable("rms_norm")
def rms_norm(x, w, eps):
    """RMSNorm over the last axis: r = 1/sqrt(mean(x x) + eps); y = (x r) w. -> (y, r keepdim)."""
    ms = mean_dims(P.mul(x, x), [-1], True)
    a = P.add(ms, np.asarray(eps, F32))
    r = P.div(P.const(1.0, a.shape), P.sqrt(a))
    return P.mul(P.mul(x, r), w), r


@P.overridable("rms_norm_backward")
def rms_norm_backward(g, x, w, r):
    """As autograd differentiates x * rsqrt(mean(x^2) + eps) * w:
    dw = sum over the leading axes of g (x r); gy = g w; dx = gy r + (((sum(gy x) (-0.5)) r^3) / n) (x 2).
    -> (dx, dw)."""
    xr = P.mul(x, r)
    dw = sum_dims(P.mul(g, xr), list(range(x.ndim - 1)))
    gy = P.mul(g, w)
    t = P.mul(gy, x)
    dx1 = P.mul(gy, r)
    gr = sum_dims(t, [-1], True)
    r3 = P.mul(P.mul(r, r), r)
    ga = P.mul(P.mul(gr, np.asarray(-0.5, F32)), r3)
    gx2 = P.div(np.broadcast_to(ga, x.shape), np.asarray(x.shape[-1], F32))
    dx2 = P.mul(gx2, P.mul(P.copy(x), np.asarray(2.0, F32)))
    return P.add(dx1, dx2), dw


def _t(a):
    return np.swapaxes(a, -1, -2)


@P.overridable("attention")
def attention(q, k, v, mask, scale):
    """s = (q k^T) scale; masked entries (mask True) -inf; p = softmax(s); o = p v. -> (o, p).
    q, k, v [..., T, d]; mask None or bool broadcastable to [..., T, T]."""
    s = P.mul(matmul(q, _t(k)), np.asarray(scale, F32))
    if mask is not None:
        s = P.select(mask, P.const(-np.inf, s.shape), s)
    p = softmax(s, -1)
    return matmul(p, v), p


@P.overridable("attention_backward")
def attention_backward(g, q, k, v, p, mask, scale):
    """dv = p^T g; dp = g v^T; ds = softmax_backward(dp, p), masked entries +0, times scale;
    dk = ds^T q; dq = ds k. -> (dq, dk, dv)."""
    dv = matmul(_t(p), g)
    dp = matmul(g, _t(v))
    ds = softmax_backward(dp, p, -1)
    if mask is not None:
        ds = P.select(mask, P.const(0.0, ds.shape), ds)
    ds = P.mul(ds, np.asarray(scale, F32))
    return matmul(ds, k), matmul(_t(ds), q), dv


# -- embedding backward -------------------------------------------------------------------------------
@P.overridable("embedding_backward")
def embedding_backward(index, g, num_weights):
    """onehot(index)^T @ g: row w = fold(fma, +0) over positions p in increasing order of
    [index[p] == w] g[p] (index [P] int64, g [P, D] -> [num_weights, D]). For finite g this is
    the sum of the rows g[p] with index[p] == w in increasing p, from +0 (fma(1, g, acc) rounds
    as acc + g; a zero term never changes a sum begun at +0, which is never -0); a non-finite
    g[p, d] makes column d NaN in every row w != index[p] (0 * inf)."""
    hot = P.onehot(index, P.const(1.0, index.shape), P.const(0.0, (num_weights,)))
    return matmul(hot.T, g)
