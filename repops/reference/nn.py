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


def rope_pairs(x_shape, cos_shape, sin_shape) -> tuple:
    """The shape of x's interleaved pairs [..., n/2] (x [..., n], n even), which cos and sin
    broadcast to (never enlarging x: the result has x's shape); else a ValueError that says so.
    Shapes as tuples: the torch wrapper checks with it too, before any dispatch."""
    if not x_shape or x_shape[-1] % 2:
        raise ValueError(f"rope: x must have an even last axis (its interleaved pairs); got shape {list(x_shape)}")
    pairs = tuple(x_shape[:-1]) + (x_shape[-1] // 2,)
    for name, s in (("cos", cos_shape), ("sin", sin_shape)):
        if len(s) > len(pairs) or any(a != 1 and a != b for a, b in zip(reversed(s), reversed(pairs))):
            raise ValueError(f"rope: {name} of shape {list(s)} does not broadcast to x's pairs {list(pairs)} "
                             "(a table [T, n/2] for x [..., T, n])")
    return pairs


def _rotate(x, cos, sin, sign: int):
    """Each pair (x0, x1) of x's last axis -> (x0 cos + x1 t0, x1 cos + x0 t1), where the lane
    table t = (-sin, sin) for sign -1 (rope), (sin, -sin) for +1 (its backward): one add of two
    products, the result a kernel output a referee follows to its sources. Operands: x's pairs
    and their swap (views: the swap a negative stride), cos at both lanes (a broadcast view) and
    t, one copy of neg(sin) and sin laid side by side (a CAT)."""
    pairs = x.reshape(rope_pairs(x.shape, np.shape(cos), np.shape(sin)) + (2,))  # (splitting an axis: a view)
    table = np.broadcast_shapes(np.shape(sin), np.shape(cos))
    sin = np.broadcast_to(sin, table)
    lanes = [P.neg(sin)[..., None], sin[..., None]]
    t = P.place(table + (2,), len(table), [(0, 1, lanes[sign > 0]), (1, 1, lanes[sign < 0])])
    c = np.broadcast_to(cos[..., None], pairs.shape)
    return P.add(P.mul(pairs, c), P.mul(pairs[..., ::-1], np.broadcast_to(t, pairs.shape)))


@P.overridable("rope")
def rope(x, cos, sin):
    """Rotary embedding of interleaved pairs: (x0 cos - x1 sin, x0 sin + x1 cos), as autograd's
    composition computes it (x0 cos + (-(x1 sin)) rounds as x0 cos - x1 sin: negation is exact).
    x [..., n], cos and sin broadcast to [..., n/2]."""
    return _rotate(x, cos, sin, -1).reshape(x.shape)


@P.overridable("rope_backward")
def rope_backward(g, cos, sin):
    """dx = (g0 cos + g1 sin, g1 cos - g0 sin) per pair, then + (+0): autograd's composition
    gives each lane's gradient to a slice_backward (the other lanes +0) and adds the two, so a
    -0 gradient arrives as +0."""
    r = _rotate(g, cos, sin, 1)
    return P.add(r, P.const(0.0, r.shape)).reshape(g.shape)


def _t(a):
    return np.swapaxes(a, -1, -2)


@P.overridable("attention")
def attention(q, k, v, mask, scale, bias=None):
    """s = (q k^T) scale (+ bias); masked entries (mask True) -inf; p = softmax(s), +0 on a row
    whose every score is -inf (torch's _safe_softmax, what its SDPA computes: a fully masked
    query attends to nothing, o = 0, where softmax would give NaN); o = p v.
    -> (o, p). q, k, v [..., T, d]; mask None or bool broadcastable to [..., T, S]; bias None
    or float broadcastable to it (an additive mask)."""
    s = P.mul(matmul(q, _t(k)), np.asarray(scale, F32))
    if bias is not None:
        s = P.add(s, bias)
    if mask is not None:
        s = P.select(mask, P.const(-np.inf, s.shape), s)
    none = P.eq(max_dims(s, [-1], True), np.float32(-np.inf))
    p = P.select(none, P.const(0.0, s.shape), softmax(s, -1))
    return matmul(p, v), p


@P.overridable("attention_backward")
def attention_backward(g, q, k, v, p, mask, scale):
    """dv = p^T g; dp = g v^T; ds = softmax_backward(dp, p), masked entries +0, times scale;
    dk = ds^T q; dq = ds k. -> (dq, dk, dv). (An additive bias's gradient is ds before the
    scale, taken by repops/ops.py when the bias is trainable.)"""
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


# -- convolution: im2col views and fixed-order matmuls ---------------------------------------------
# Padding and scatter are prims.place() copies, every other operand a view: a referee can
# follow each element of each kernel to its source (no materialised operand).
def _spatial_pad(x, before, after, value):
    """x [N, C, *S] with `value` before/after each spatial axis."""
    return P.pad(x, {2 + a: (lo, hi) for a, (lo, hi) in enumerate(zip(before, after))}, value)


def _windows(x, k_shape, stride, dilation, out=None):
    """The window view [N, C, *K, *O] of x [N, C, *S]: element (k, o) is position
    o*stride + k*dilation of each spatial axis. -> (view, O)."""
    xp = P.xp_of(x)
    S = x.shape[2:]
    O = out or [(s - d * (k - 1) - 1) // st + 1 for s, k, st, d in zip(S, k_shape, stride, dilation)]
    st = x.strides
    shape = x.shape[:2] + tuple(k_shape) + tuple(O)
    strides = st[:2] + tuple(s * d for s, d in zip(st[2:], dilation)) + tuple(s * t for s, t in zip(st[2:], stride))
    return xp.lib.stride_tricks.as_strided(x, shape, strides), list(O)


def _scatter(c, k, stride, dilation, grid):
    """c [N, C, *O] placed at positions o*stride + k*dilation of a +0 grid [N, C, *grid]:
    one place() per spatial axis, last axis first."""
    for a in reversed(range(len(grid))):
        shape = list(c.shape)
        shape[2 + a] = grid[a]
        c = P.place(shape, 2 + a, [(k[a] * dilation[a], stride[a], c)], 0.0)
    return c


def _scatter_sum(pieces, stride, dilation, shape):
    """+0 of `shape` [N, C, *grid], then add(acc, c scattered at o*stride + k*dilation) for each
    (k, c) of `pieces` in turn (kernel offsets in row-major order): overlaps summed in one order."""
    acc = P.const(0.0, tuple(shape))
    for k, c in pieces:
        acc = P.add(acc, _scatter(c, k, stride, dilation, list(shape[2:])))
    return acc


def _window_fold(prim, view, kernel, init):
    """prim over each window's elements of a _windows view, offset by offset in row-major order, from init."""
    acc = init
    for k in np.ndindex(*kernel):
        acc = prim(acc, view[(slice(None), slice(None)) + k])
    return acc


def _col2im(cols, stride, dilation, grid):
    """cols [N, C, *K, *O] -> [N, C, *grid] (the inverse of _windows, summing overlaps)."""
    K = cols.shape[2:2 + len(grid)]
    return _scatter_sum(((k, cols[(slice(None), slice(None)) + k]) for k in np.ndindex(*K)), stride, dilation,
                        cols.shape[:2] + tuple(grid))


def _unpad(acc, padding, S):
    """The input-shaped part of a padded-grid result (a copy kernel when there was padding)."""
    if acc.shape[2:] == tuple(S):
        return acc
    return P.copy(acc[(slice(None), slice(None)) + tuple(slice(p, p + s) for p, s in zip(padding, S))])


def conv(x, w, b, stride, padding, dilation, groups, out=None):
    """x [N, Ci, *S], w [Co, Ci/groups, *K]: per group g, out[n, co, o] = fold(fma, +0) over
    (ci, k...) in row-major order of w[co, ci, k] x_pad[n, ci, o*stride + k*dilation] (the
    im2col matmul, groups as a batch axis), then + bias[co]. Padding is +0. out: the output
    sizes when fewer than fit (a transposed convolution's input gradient)."""
    view, O = _windows(_spatial_pad(x, padding, padding, 0.0), w.shape[2:], stride, dilation, out)
    N, C, Co = x.shape[0], x.shape[1], w.shape[0]
    cg, cog, kn, L = C // groups, Co // groups, int(np.prod(w.shape[2:])), int(np.prod(O))
    cols = P.copy(view).reshape(N, groups, cg * kn, L)
    out = matmul(w.reshape(groups, cog, cg * kn), cols).reshape((N, Co) + tuple(O))
    if b is not None:
        out = P.add(out, b.reshape((Co,) + (1,) * len(O)))
    return out


def conv_backward(g, x, w, stride, padding, dilation, groups, mask):
    """-> (dx, dw, db). db[co] = sum of g over (n, o...) in row-major order; per group
    dw = fold(fma, +0) over (n, o) in row-major order of g[n, co, o] cols[n, (ci, k), o] (a
    matmul); dcols = w^T g (a matmul over co), and dx = _col2im(dcols) inside the padding."""
    xp = P.xp_of(x)
    N, C, Co = x.shape[0], x.shape[1], w.shape[0]
    K, S = w.shape[2:], x.shape[2:]
    cg, cog, kn = C // groups, Co // groups, int(np.prod(K))
    O = list(g.shape[2:])
    L = int(np.prod(O))
    gs = g.reshape(N, groups, cog, L)
    db = sum_dims(g, [0] + list(range(2, g.ndim))) if mask[2] else None
    dw = dx = None
    if mask[1]:
        view, _ = _windows(_spatial_pad(x, padding, padding, 0.0), K, stride, dilation, O)
        cols = P.copy(view).reshape(N, groups, cg * kn, L)
        a = P.copy(xp.moveaxis(gs, 0, 2)).reshape(groups, cog, N * L)            # [G, cog, N, L]
        bm = P.copy(xp.transpose(cols, (1, 0, 3, 2))).reshape(groups, N * L, cg * kn)  # [G, N, L, ckn]
        dw = matmul(a, bm).reshape(w.shape)
    if mask[0]:
        dx = conv_input_grad(g, w, S, stride, padding, dilation, groups)
    return dx, dw, db


def conv_input_grad(g, w, S, stride, padding, dilation, groups):
    """The input gradient of conv (spatial sizes S): per group dcols = w^T g (fold(fma, +0)
    over the group's output channels co, a matmul), then _col2im: dx[n, ci, s] = +0 plus, per
    kernel offset k in row-major order, dcols[n, ci, k, o] where o*stride + k*dilation = s +
    padding (one add per offset). Also the spec of transposed convolution (conv_transpose.py)."""
    xp = P.xp_of(g)
    N, Co, C = g.shape[0], w.shape[0], w.shape[1] * groups
    K, O = w.shape[2:], list(g.shape[2:])
    cg, cog, kn = C // groups, Co // groups, int(np.prod(K))
    wt = xp.swapaxes(w.reshape(groups, cog, cg * kn), -1, -2)
    dcols = matmul(wt, g.reshape(N, groups, cog, int(np.prod(O)))).reshape((N, C) + tuple(K) + tuple(O))
    grid = [s + 2 * p for s, p in zip(S, padding)]
    return _unpad(_col2im(dcols, stride, dilation, grid), padding, S)


# -- batch norm -------------------------------------------------------------------------------------------
def _per_channel(x):
    """The axes batch norm reduces (all but the channel axis 1) and the broadcast shape of a
    per-channel vector."""
    return [0] + list(range(2, x.ndim)), (1, x.shape[1]) + (1,) * (x.ndim - 2)


def batch_norm(x, w, b, eps):
    """Training statistics per channel c over (n, s...) in row-major order: mean = sum/count;
    var = sum((x - mean)^2)/count; invstd = 1/sqrt(var + eps); y = ((x - mean) invstd) w + b.
    -> (y, mean [C], invstd [C], var [C])."""
    dims, shp = _per_channel(x)
    mean = mean_dims(x, dims)
    d = P.sub(x, mean.reshape(shp))
    var = mean_dims(P.mul(d, d), dims)
    invstd = P.div(P.const(1.0, var.shape), P.sqrt(P.add(var, P.const(eps, var.shape))))
    y = P.mul(d, invstd.reshape(shp))
    if w is not None:
        y = P.mul(y, w.reshape(shp))
    if b is not None:
        y = P.add(y, b.reshape(shp))
    return y, mean, invstd, var


def _frozen_invstd(var, eps):
    return P.div(P.const(1.0, var.shape), P.sqrt(P.add(var, P.const(eps, var.shape))))


def batch_norm_frozen(x, w, b, mean, var, eps):
    """Evaluation mode: the running statistics normalise. invstd = 1/sqrt(var + eps);
    y = ((x - mean) invstd) w + b."""
    _, shp = _per_channel(x)
    y = P.mul(P.sub(x, mean.reshape(shp)), _frozen_invstd(var, eps).reshape(shp))
    y = y if w is None else P.mul(y, w.reshape(shp))
    return y if b is None else P.add(y, b.reshape(shp))


def batch_norm_frozen_backward(go, x, w, mean, var, eps, mask):
    """The statistics are constants: dx = (go w) invstd; dw = sum(go xhat); db = sum(go)."""
    dims, shp = _per_channel(x)
    invstd = _frozen_invstd(var, eps).reshape(shp)
    dx = dw = db = None
    if mask[0]:
        dx = P.mul(P.mul(go, w.reshape(shp)) if w is not None else go, invstd)
    if mask[1]:
        dw = sum_dims(P.mul(go, P.mul(P.sub(x, mean.reshape(shp)), invstd)), dims)
    if mask[2]:
        db = sum_dims(go, dims)
    return dx, dw, db


def batch_norm_backward(go, x, w, mean, invstd, mask):
    """xhat = (x - mean) invstd; gw = go w; dx = invstd ((gw - mean(gw)) - xhat mean(gw xhat))
    (per channel, means over (n, s)); dw = sum(go xhat); db = sum(go). -> (dx, dw, db)."""
    dims, shp = _per_channel(x)
    xhat = P.mul(P.sub(x, mean.reshape(shp)), invstd.reshape(shp))
    g = P.mul(go, w.reshape(shp)) if w is not None else go
    dx = dw = db = None
    if mask[0]:
        mg = mean_dims(g, dims).reshape(shp)
        mgx = mean_dims(P.mul(g, xhat), dims).reshape(shp)
        dx = P.mul(invstd.reshape(shp), P.sub(P.sub(g, mg), P.mul(xhat, mgx)))
    if mask[1]:
        dw = sum_dims(P.mul(go, xhat), dims)
    if mask[2]:
        db = sum_dims(go, dims)
    return dx, dw, db


# -- pooling ----------------------------------------------------------------------------------------------------
def per_axis(v, nd: int) -> list[int]:
    """A kernel/stride/padding/dilation argument as nd ints (an int or a 1-list applies to every axis)."""
    v = [int(v)] if isinstance(v, int) else [int(a) for a in v]
    return v * nd if len(v) == 1 else v


def pool_geometry(S, kernel, stride, padding, dilation, ceil_mode):
    """Output sizes and the right-hand padding of each spatial axis, as torch defines them
    (ceil_mode adds windows that start inside the input or the left padding)."""
    O, right = [], []
    for s, k, st, p, d in zip(S, kernel, stride, padding, dilation):
        span = s + 2 * p - d * (k - 1) - 1
        o = (span + (st - 1 if ceil_mode else 0)) // st + 1
        if ceil_mode and (o - 1) * st >= s + p:
            o -= 1
        O.append(o)
        right.append(max(p, (o - 1) * st + d * (k - 1) + 1 - s - p))
    return O, right


def max_pool(x, kernel, stride, padding, dilation, ceil_mode):
    """out = fold(max, -inf) over the window in row-major order (IEEE-2019 maximum: NaN wins,
    -0 < +0); padding reads -inf."""
    O, right = pool_geometry(x.shape[2:], kernel, stride, padding, dilation, ceil_mode)
    view, _ = _windows(_spatial_pad(x, padding, right, -np.inf), kernel, stride, dilation, O)
    return _window_fold(P.max_, view, kernel, P.const(-np.inf, x.shape[:2] + tuple(O)))


def _avg_divisor(x, kernel, stride, padding, right, O, count_include_pad, divisor):
    """The divisor per output: `divisor` if given; else the window's positions inside the
    input (count_include_pad False) or inside input + padding (True): a window sum of ones
    over the padded grid (so every operand stays a view or a constant)."""
    if divisor:
        return P.const(divisor, x.shape[:2] + tuple(O))
    S = x.shape[2:]
    if count_include_pad and all(r == p for r, p in zip(right, padding)):
        return P.const(int(np.prod(kernel)), x.shape[:2] + tuple(O))
    ones = P.const(1.0, (1, 1) + tuple(S))
    if count_include_pad:  # torch counts the symmetric padding, never ceil_mode's extra
        grid = P.pad(ones, {2 + a: (p, p) for a, p in enumerate(padding)}, 1.0)
        grid = P.pad(grid, {2 + a: (0, r - p) for a, (p, r) in enumerate(zip(padding, right))}, 0.0)
    else:
        grid = _spatial_pad(ones, padding, right, 0.0)
    view, _ = _windows(grid, kernel, stride, [1] * len(kernel), O)
    return _window_fold(P.add, view, kernel, P.const(-0.0, (1, 1) + tuple(O)))


def avg_pool(x, kernel, stride, padding, ceil_mode, count_include_pad, divisor):
    """out = fold(add, -0) over the window in row-major order (padding reads +0) / the divisor
    (_avg_divisor)."""
    O, right = pool_geometry(x.shape[2:], kernel, stride, padding, [1] * len(kernel), ceil_mode)
    view, _ = _windows(_spatial_pad(x, padding, right, 0.0), kernel, stride, [1] * len(kernel), O)
    acc = _window_fold(P.add, view, kernel, P.const(-0.0, x.shape[:2] + tuple(O)))
    return P.div(acc, _avg_divisor(x, kernel, stride, padding, right, O, count_include_pad, divisor))


def avg_pool_backward(g, x, kernel, stride, padding, ceil_mode, count_include_pad, divisor):
    """share = g / divisor, summed into +0 as in convolution's backward (_col2im)."""
    S = x.shape[2:]
    O, right = pool_geometry(S, kernel, stride, padding, [1] * len(kernel), ceil_mode)
    share = P.div(g, _avg_divisor(x, kernel, stride, padding, right, O, count_include_pad, divisor))
    grid = tuple(s + p + r for s, p, r in zip(S, padding, right))
    acc = _scatter_sum(((k, share) for k in np.ndindex(*kernel)), stride, [1] * len(kernel), x.shape[:2] + grid)
    return _unpad(acc, padding, S)


# -- dropout (docs/NUMERICS.md §12) ------------------------------------------------------------------
def dropout_constants(p: float) -> tuple[int, np.float32]:
    """(threshold, scale) of dropout probability p in [0, 1): an element is kept when its
    Philox word is >= threshold = floor(p * 2^32) (exact in binary64); kept elements are
    multiplied by scale = div(1, RN(1 - p)), torch's `noise.div_(1 - p)` on a float32 mask.
    Only IEEE +, -, /, no libm: the same on every host."""
    if not 0.0 <= p < 1.0:
        raise ValueError(f"dropout probability has to be in [0, 1), got {p}")
    return int(p * 4294967296.0), np.float32(1.0) / np.float32(1.0 - p)


def dropout(x, step, seed: int, stream: int, p: float):
    """x [..] f32, step 0-d f32 (a step counter, an integer below 2^24) -> (y, m):
    keep = philox(to_int32_trunc(step), seed, stream, threshold at x's shape);
    m = select(keep, scale, +0); y = mul(x, m). m is what the backward multiplies by
    (dx = mul(g, m)), as torch's native_dropout_backward multiplies by mask * scale."""
    threshold, scale = dropout_constants(p)
    i32 = P.int32_word
    keep = P.philox(P.to_int32_trunc(step), P.const(i32(seed), (), np.int32), P.const(i32(stream), (), np.int32),
                    P.const(i32(threshold), np.shape(x), np.int32))
    m = P.select(keep, P.const(scale, ()), P.const(0.0, ()))
    return P.mul(x, m), m
