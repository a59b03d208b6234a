"""Activations and losses that models in the wild use (Hugging Face regression and multi-label
heads, torch.nn's activation zoo), each a composition of the binary32 primitives and the
transcendentals of math.py (docs/NUMERICS.md §8, "Activations and losses"). None is a fused
kernel: the compiled backends run each step as its primitive, so their bits are these by
construction. The formulas are torch's own (aten/src/ATen/native/cpu/Activation.cpp,
Loss.cpp), in torch's order, so results agree with torch to rounding."""
from __future__ import annotations

import math

import numpy as np

from . import math as M
from . import prims as P

F32 = np.float32
INF = F32(np.inf)
# RN(1/k!) for k = 8 .. 2, then 1: expm1's Taylor polynomial on |x| < 0.5 (truncation error
# below 0.5^9/9! relative, < 0.1 ulp)
EXPM1_TAYLOR = [F32(1.0 / math.factorial(k)) for k in range(8, 1, -1)] + [F32(1.0)]


def k(v) -> np.float32:
    """A Python number as a binary32 constant: rounded once from its double value."""
    return F32(v)


# -- accurate building blocks -----------------------------------------------------------------------------
def expm1(x):
    """e^x - 1: |x| < 0.5: x (1 + x/2 + ... + x^7/8!) (fma Horner, then one mul, so -0 stays
    -0); else exp(x) - 1 (no cancellation there: e^x - 1 >= 0.39 |e^x|). NaN propagates."""
    small = P.mul(M.horner(x, EXPM1_TAYLOR), x)
    return P.select(P.lt(P.abs_(x), k(0.5)), small, P.sub(M.exp(x), k(1.0)))


def log1p(u):
    """log(1 + u) for u >= -1 (Goldberg): w = 1 + u; u where w == 1 (the sum rounded u away)
    or u = +inf; else u (log(w) / (w - 1)), which cancels w's rounding error. u = -1 gives -inf."""
    w = P.add(k(1.0), u)
    d = P.sub(w, k(1.0))
    r = P.mul(u, P.div(M.log(w), d))
    return P.select(P.eq(d, k(0.0)), u, P.select(P.eq(u, INF), u, r))


def _times(x, c):
    """mul(x, c), left out when c = 1 (the identity), so a default scale adds no kernel."""
    return x if c == 1 else P.mul(x, k(c))


# -- activations -----------------------------------------------------------------------------------------
def sign(x):
    """(0 < x) - (x < 0): +-1, +0 for +-0 and NaN (torch.sign, sgn of a real tensor)."""
    one, zero = k(1.0), k(0.0)
    return P.sub(P.select(P.lt(zero, x), one, zero), P.select(P.lt(x, zero), one, zero))


def leaky_relu(x, slope):
    """x > 0 ? x : x slope."""
    return P.select(P.lt(k(0.0), x), x, P.mul(x, k(slope)))


def leaky_relu_backward(g, x, slope):
    """x > 0 ? g : g slope."""
    return P.select(P.lt(k(0.0), x), g, P.mul(g, k(slope)))


def elu(x, alpha, scale, input_scale):
    """x <= 0 ? expm1(x input_scale) RN(alpha scale) : x scale (selu, celu: their constants)."""
    neg = P.mul(expm1(_times(x, input_scale)), k(alpha * scale))
    return P.select(P.le(x, k(0.0)), neg, _times(x, scale))


def elu_backward(g, alpha, scale, input_scale, is_result, x_or_y):
    """x <= 0 ? g input_scale (y + RN(alpha scale)) (from the result y), or
    g input_scale RN(alpha scale) exp(x input_scale) (from the input x); else g scale."""
    v, neg_coef = x_or_y, k(alpha * scale)
    if is_result:
        neg = P.mul(_times(g, input_scale), P.add(v, neg_coef))
    else:
        neg = P.mul(P.mul(_times(g, input_scale), neg_coef), M.exp(_times(v, input_scale)))
    return P.select(P.le(v, k(0.0)), neg, _times(g, scale))


def softplus(x, beta, threshold):
    """x beta > threshold ? x : log1p(exp(x beta)) / beta."""
    z = _times(x, beta)
    soft = log1p(M.exp(z))
    return P.select(P.lt(k(threshold), z), x, soft if beta == 1 else P.div(soft, k(beta)))


def softplus_backward(g, x, beta, threshold):
    """x beta > threshold ? g : (g e) / (e + 1), e = exp(x beta)."""
    z = _times(x, beta)
    e = M.exp(z)
    return P.select(P.lt(k(threshold), z), g, P.div(P.mul(g, e), P.add(e, k(1.0))))


def mish(x):
    """x tanh(log1p(exp(x)))."""
    return P.mul(x, M.tanh(log1p(M.exp(x))))


def _relu6_of_shift(x):
    return P.min_(P.max_(P.add(x, k(3.0)), k(0.0)), k(6.0))


def hardswish(x):
    """(x min(max(x + 3, 0), 6)) / 6."""
    return P.div(P.mul(x, _relu6_of_shift(x)), k(6.0))


def hardswish_backward(g, x):
    """x <= -3 ? +0 : x < 3 ? g (x / 3 + 0.5) : g (torch's breakpoints: its kernel gives 0 at
    x = -3 and g at 3, the one-sided derivatives away from the middle piece)."""
    mid = P.mul(g, P.add(P.div(x, k(3.0)), k(0.5)))
    return P.select(P.le(x, k(-3.0)), k(0.0), P.select(P.lt(x, k(3.0)), mid, g))


def hardsigmoid(x):
    """min(max(x + 3, 0), 6) / 6."""
    return P.div(_relu6_of_shift(x), k(6.0))


def hardsigmoid_backward(g, x):
    """-3 < x < 3 ? g RN(1/6) : +0."""
    inside = P.select(P.lt(x, k(3.0)), P.mul(g, k(1.0 / 6.0)), k(0.0))
    return P.select(P.lt(k(-3.0), x), inside, k(0.0))


def hardtanh(x, lo, hi):
    """min(max(x, lo), hi) (clamp; NaN stays NaN)."""
    return P.min_(P.max_(x, k(lo)), k(hi))


def hardtanh_backward(g, x, lo, hi):
    """x <= lo or x >= hi ? +0 : g."""
    return P.select(P.le(x, k(lo)), k(0.0), P.select(P.le(k(hi), x), k(0.0), g))


def log_sigmoid(x):
    """min(x, 0) - log1p(e), e = exp(-|x|) (never overflows). -> (y, e): e is torch's buffer."""
    e = M.exp(P.neg(P.abs_(x)))
    return P.sub(P.min_(x, k(0.0)), log1p(e)), e


def log_sigmoid_backward(g, x):
    """g sigma(-x): x < 0: g (1 - e/(1 + e)); else g (e/(1 + e)), e = exp(-|x|) (recomputed from
    x, so the backward never depends on the device's buffer)."""
    e = M.exp(P.neg(P.abs_(x)))
    q = P.div(e, P.add(k(1.0), e))
    return P.mul(g, P.select(P.lt(x, k(0.0)), P.sub(k(1.0), q), q))


# -- losses (elementwise; the reduction is aten_nn's) ------------------------------------------------------
def squared_error(x, y):
    """(x - y)^2 as one mul."""
    d = P.sub(x, y)
    return P.mul(d, d)


def squared_error_backward(g, x, y, norm):
    """(x - y) RN(norm) g, norm = 2 (2/n for a mean)."""
    return P.mul(P.mul(P.sub(x, y), k(norm)), g)


def smooth_l1(x, y, beta):
    """z = |x - y|; z < beta ? ((0.5 z) z) / beta : z - RN(0.5 beta)."""
    z = P.abs_(P.sub(x, y))
    return P.select(P.lt(z, k(beta)), P.div(P.mul(P.mul(k(0.5), z), z), k(beta)), P.sub(z, k(0.5 * beta)))


def smooth_l1_backward(g, x, y, beta, norm):
    """d = x - y; d <= -beta ? RN(-norm) g : d >= beta ? RN(norm) g : ((RN(norm) d) g) / beta."""
    d = P.sub(x, y)
    mid = P.div(P.mul(P.mul(k(norm), d), g), k(beta))
    return P.select(P.le(d, k(-beta)), P.mul(k(-norm), g), P.select(P.le(k(beta), d), P.mul(k(norm), g), mid))


def huber(x, y, delta):
    """z = |x - y|; z < delta ? (0.5 z) z : delta (z - RN(0.5 delta))."""
    z = P.abs_(P.sub(x, y))
    return P.select(P.lt(z, k(delta)), P.mul(P.mul(k(0.5), z), z), P.mul(k(delta), P.sub(z, k(0.5 * delta))))


def huber_backward(g, x, y, delta, norm):
    """d = x - y; d < -delta ? (RN(-norm) g) delta : d > delta ? (RN(norm) g) delta : (RN(norm) d) g."""
    d = P.sub(x, y)
    lo = P.mul(P.mul(k(-norm), g), k(delta))
    hi = P.mul(P.mul(k(norm), g), k(delta))
    return P.select(P.lt(d, k(-delta)), lo, P.select(P.lt(k(delta), d), hi, P.mul(P.mul(k(norm), d), g)))


def binary_cross_entropy(p, y):
    """(y - 1) max(log1p(-p), -100) - y max(log(p), -100)."""
    a = P.mul(P.sub(y, k(1.0)), P.max_(log1p(P.neg(p)), k(-100.0)))
    return P.sub(a, P.mul(y, P.max_(M.log(p), k(-100.0))))


def binary_cross_entropy_backward(g, p, y):
    """(g (p - y)) / max((1 - p) p, RN(1e-12))."""
    return P.div(P.mul(g, P.sub(p, y)), P.max_(P.mul(P.sub(k(1.0), p), p), k(1e-12)))


def bce_with_logits(x, y, pos_weight=None):
    """(1 - y) x - log_sigmoid(x) [times (pos_weight - 1) y + 1]."""
    ls = log_sigmoid(x)[0]
    if pos_weight is not None:
        ls = P.mul(ls, P.add(P.mul(P.sub(pos_weight, k(1.0)), y), k(1.0)))
    return P.sub(P.mul(P.sub(k(1.0), y), x), ls)


# -- powers --------------------------------------------------------------------------------------------------
@P.overridable("pow")
def pow(x, y):
    """x^y with torch's (C99's) special cases, from r = exp(y log|x|):
    x < 0: r for an even integer y, -r for an odd one, NaN otherwise (but r for x = -inf); x = -0: -r for an odd
    integer y; |x| = 1 and y = +-inf: 1; x = 1 or y = 0: 1 (NaN in the other operand too).
    Integer y: trunc(y) = y; even: trunc(y/2)*2 = y (both exact). y log|x| is carried in two floats
    (math.log_hilo, the product's error by fma, math.exp_hilo): within ~1 ulp whatever the exponent
    (in one float each, |y log x| 2^-24 relative beyond exp's ulp: 128 ulp on the test's sweep)."""
    one, nan = k(1.0), k(np.nan)
    h, l = M.log_hilo(P.abs_(x))
    ph = P.mul(y, h)
    r = M.exp_hilo(ph, P.fma(y, l, P.fma(y, h, P.neg(ph))))
    integral = P.eq(P.trunc(y), y)
    even = P.eq(P.mul(P.trunc(P.mul(y, k(0.5))), k(2.0)), y)
    odd_r = P.select(even, r, P.neg(r))                        # (only read where y is integral)
    negative = P.select(integral, odd_r, P.select(P.eq(x, -INF), r, nan))  # (-inf)^y: +-inf/+-0 by C99
    minus_zero = P.select(P.lt(P.div(one, x), k(0.0)), P.select(integral, odd_r, r), r)
    r = P.select(P.lt(x, k(0.0)), negative, minus_zero)
    r = P.select(P.eq(P.abs_(y), INF), P.select(P.eq(P.abs_(x), one), one, r), r)
    return P.select(P.eq(y, k(0.0)), one, P.select(P.eq(x, one), one, r))
