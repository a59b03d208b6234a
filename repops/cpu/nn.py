"""Row operators and the AdamW step of the CPU backend (kernels/nn.c, kernels/optim.c), each
equal to the repops.reference function of the same name bit for bit."""
from __future__ import annotations

import math

import numpy as np

from ..kernels import NORMS, ROWS
from ..reference.nn import rope_pairs
from .build import default_threads, lib
from .linalg import matmul

F32 = np.float32
SOFTMAX, LOG_SOFTMAX, SOFTMAX_BWD, LOG_SOFTMAX_BWD, ATT_ROWS, ATT_ROWS_BWD = (
    ROWS[k] for k in ("softmax", "log_softmax", "softmax_backward", "log_softmax_backward", "attention_rows",
                      "attention_rows_backward"))
LAYER_NORM, LAYER_NORM_BWD, RMS_NORM, RMS_NORM_BWD = (
    NORMS[k] for k in ("layer_norm", "layer_norm_backward", "rms_norm", "rms_norm_backward"))


def _threads():
    return default_threads()


def _c(x) -> np.ndarray:
    """x as a C-contiguous float32 array: an exact copy when strided. (Not ascontiguousarray:
    it makes a 0-d array 1-d, and softmax of a 0-dim tensor came back with shape (1,).)"""
    return np.require(x, F32, "C")


def _ptr(x):
    return None if x is None else x.__array_interface__["data"][0]


def _check(rc, what):
    if rc != 0:
        raise MemoryError(f"{what}: out of memory")


def _rows(op, x, y, dim, mask=None, scale=1.0):
    x = _c(x)
    y = None if y is None else _c(y)
    dim = dim % x.ndim if x.ndim else 0
    shape = x.shape
    n = shape[dim] if x.ndim else 1
    outer = math.prod(shape[:dim]) if x.ndim else 1
    inner = math.prod(shape[dim + 1:]) if x.ndim else 1
    out = np.empty(shape, F32)
    m = None if mask is None else np.ascontiguousarray(np.broadcast_to(np.asarray(mask, np.bool_), shape)).view(np.uint8)
    if out.size:
        _check(lib().repops_softmax_f32(op, _ptr(x), _ptr(y), _ptr(m), F32(scale), _ptr(out), outer, n, inner,
                                        _threads()), "softmax")
    return out


def softmax(x, dim):
    return _rows(SOFTMAX, x, None, dim)


def log_softmax(x, dim):
    return _rows(LOG_SOFTMAX, x, None, dim)


def softmax_backward(g, y, dim):
    return _rows(SOFTMAX_BWD, g, y, dim)


def log_softmax_backward(g, y, dim):
    return _rows(LOG_SOFTMAX_BWD, g, y, dim)


def _norm(op, a, x, w, b, eps, s0, s1, want_dw, want_db, n):
    rows = a.size // n if n else 0
    out = np.empty(a.shape, F32)
    dw = np.empty(n, F32) if want_dw else None
    db = np.empty(n, F32) if want_db else None
    if a.size:
        _check(lib().repops_norm_f32(op, _ptr(a), _ptr(x), _ptr(w), _ptr(b), F32(eps), _ptr(s0), _ptr(s1), _ptr(out),
                                     _ptr(dw), _ptr(db), rows, n, _threads()), "norm")
    return out, dw, db


def layer_norm(x, w, b, eps, nd):
    x = _c(x)
    n = math.prod(x.shape[x.ndim - nd:])
    stat = x.shape[:x.ndim - nd] + (1,) * nd
    mean, rstd = np.empty(stat, F32), np.empty(stat, F32)
    w = None if w is None else _c(np.broadcast_to(w, x.shape[x.ndim - nd:]))
    b = None if b is None else _c(np.broadcast_to(b, x.shape[x.ndim - nd:]))
    y, _, _ = _norm(LAYER_NORM, x, None, w, b, eps, mean, rstd, False, False, n)
    return y, mean, rstd


def layer_norm_backward(go, x, mean, rstd, w, nd, want_dw, want_db):
    go, x = _c(go), _c(x)
    tail = x.shape[x.ndim - nd:]
    n = math.prod(tail)
    w = None if w is None else _c(np.broadcast_to(w, tail))
    dx, dw, db = _norm(LAYER_NORM_BWD, go, x, w, None, 0.0, _c(mean), _c(rstd), want_dw, want_db, n)
    return dx, None if dw is None else dw.reshape(tail), None if db is None else db.reshape(tail)


def rms_norm(x, w, eps):
    x = _c(x)
    r = np.empty(x.shape[:-1] + (1,), F32)
    y, _, _ = _norm(RMS_NORM, x, None, _c(np.broadcast_to(w, x.shape[-1:])), None, eps, r, None, False, False,
                    x.shape[-1])
    return y, r


def rms_norm_backward(g, x, w, r):
    g, x = _c(g), _c(x)
    dx, dw, _ = _norm(RMS_NORM_BWD, g, x, _c(np.broadcast_to(w, x.shape[-1:])), None, 0.0, _c(r), None, True, False,
                      x.shape[-1])
    return dx, dw


def _t(a):
    return np.swapaxes(a, -1, -2)


def attention(q, k, v, mask, scale, bias=None):
    if bias is not None:  # scale, then the additive bias, then the mask: the reference's three kernels
        from ..reference.nn import attention as ref
        return ref.reference(q, k, v, mask, scale, bias)
    s = matmul(q, _t(k))
    p = _rows(ATT_ROWS, s, None, -1, mask, scale)
    return matmul(p, v), p


def attention_backward(g, q, k, v, p, mask, scale):
    dv = matmul(_t(p), g)
    dp = matmul(g, _t(v))
    ds = _rows(ATT_ROWS_BWD, dp, p, -1, mask, scale)
    return matmul(ds, k), matmul(_t(ds), q), dv


def adamw(p, g, m, v, b1t, b2t, lr, beta1, beta2, eps, weight_decay):
    """In place when p, m, v, b1t, b2t are writable contiguous float32 arrays (the tensors of
    repops.ops.adamw_); returns them (else fresh arrays), as the reference returns new values."""
    def own(a):
        a = np.asarray(a)
        return a if a.dtype == F32 and a.flags.c_contiguous and a.flags.writeable else np.array(a, F32)
    p, m, v, b1t, b2t = (own(a) for a in (p, m, v, b1t, b2t))
    g = _c(g)
    c = np.array([1.0 - lr * weight_decay, 1.0 - beta1, beta2, 1.0 - beta2, beta1, lr, eps], F32)
    lib().repops_adamw_f32(_ptr(p), _ptr(g), _ptr(m), _ptr(v), _ptr(b1t), _ptr(b2t), _ptr(c), p.size, _threads())
    return p, m, v, b1t, b2t


def _rope(x, cos, sin, backward):
    """kernels/nn.c repops_rope_f32 over x's pairs (x copied contiguous if strided). The tables
    are read at the trailing axes they vary along (their leading size-1 axes dropped), copied
    there once (table-sized): pair i reads element i % period."""
    pairs = rope_pairs(np.shape(x), np.shape(cos), np.shape(sin))
    x = _c(x)
    out = np.empty(x.shape, F32)
    n = math.prod(pairs)
    if n:
        varying = np.broadcast_shapes(np.shape(cos), np.shape(sin))
        while varying and varying[0] == 1:
            varying = varying[1:]
        lead = len(pairs) - len(varying)
        c, s = (np.require(np.broadcast_to(np.asarray(t, F32), pairs)[(0,) * lead], F32, "C") for t in (cos, sin))
        lib().repops_rope_f32(int(backward), _ptr(x), _ptr(c), _ptr(s), max(1, c.size), _ptr(out), n, _threads())
    return out


def rope(x, cos, sin):
    return _rope(x, cos, sin, False)


def rope_backward(g, cos, sin):
    return _rope(g, cos, sin, True)


def embedding_backward(index, g, num_weights):
    index = np.ascontiguousarray(np.asarray(index, np.int64))
    g = _c(g)
    out = np.empty((num_weights, g.shape[1]), F32)
    _check(lib().repops_embedding_backward_f32(_ptr(index), _ptr(g), _ptr(out), index.size, g.shape[1], num_weights,
                                               _threads()), "embedding_backward")
    return out


TABLE = {"embedding_backward": embedding_backward, "softmax": softmax, "log_softmax": log_softmax, "softmax_backward": softmax_backward,
         "log_softmax_backward": log_softmax_backward, "layer_norm": layer_norm,
         "layer_norm_backward": layer_norm_backward, "rms_norm": rms_norm, "rms_norm_backward": rms_norm_backward,
         "rope": rope, "rope_backward": rope_backward, "attention": attention, "attention_backward": attention_backward,
         "adamw": adamw}
