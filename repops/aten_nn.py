"""aten's activations and losses (forward and backward) on RepOps: each the composition in
repops/reference/activations.py (docs/NUMERICS.md §8, "Activations and losses"); the in-place
variants copy the result back (one copy kernel whose output is self). Losses reduce as the
other reductions do: mean = div(sum in row-major order, n), sum from -0."""
from __future__ import annotations

import numpy as np
import torch

from . import faults
from .aten import _clamp, _inplace, arr, np_, register, tt
from .errors import UnsupportedOpError
from .reference import activations as A
from .reference.fold import mean_dims, sum_dims

aten = torch.ops.aten


def _pair(name, fn, *inplace):
    """fn(x, *args) on one float tensor as aten.<name> and its in-place variants."""
    register(getattr(aten, name).default)(lambda a, *args: tt(fn(np_(a, name), *args)))
    for op in inplace:
        register(op)(lambda a, *args: _inplace(a, fn(np_(a, name), *args)))


def _grad(name, fn):
    """aten.<name>(grad, x, *args) -> fn(g, x, *args)."""
    register(getattr(aten, name).default)(lambda g, a, *args: tt(fn(np_(g, name), np_(a, name), *args)))


_pair("leaky_relu", lambda x, slope=0.01: A.leaky_relu(x, slope), aten.leaky_relu_.default)
_grad("leaky_relu_backward", lambda g, x, slope, is_result: A.leaky_relu_backward(g, x, slope))
_pair("elu", lambda x, alpha=1.0, scale=1.0, input_scale=1.0: A.elu(x, alpha, scale, input_scale), aten.elu_.default)
_pair("celu", lambda x, alpha=1.0: A.elu(x, alpha, 1.0, 1.0 / alpha), aten.celu_.default)
_pair("softplus", lambda x, beta=1.0, threshold=20.0: A.softplus(x, beta, threshold))
_grad("softplus_backward", A.softplus_backward)
_pair("mish", A.mish, aten.mish_.default)
# (no mish_backward: torch decomposes it on meta tensors, where a job's graph is committed, into
# softplus, tanh, sigmoid and arithmetic; RepOps runs that same composite on every device)
_pair("hardswish", A.hardswish, aten.hardswish_.default)
_grad("hardswish_backward", A.hardswish_backward)
_pair("hardsigmoid", A.hardsigmoid, aten.hardsigmoid_.default)
_grad("hardsigmoid_backward", A.hardsigmoid_backward)
_pair("hardtanh", lambda x, lo=-1.0, hi=1.0: A.hardtanh(x, lo, hi), aten.hardtanh_.default)
_grad("hardtanh_backward", A.hardtanh_backward)
_pair("sign", A.sign, aten.sign_.default)
_pair("sgn", A.sign, aten.sgn_.default)


# clamp's other overloads and in-place forms (clamp_min_ in Hugging Face's losses and masks)
register(aten.clamp_min.Tensor)(lambda a, lo: tt(_clamp(np_(a, "clamp_min"), lo, None)))
register(aten.clamp_max.Tensor)(lambda a, hi: tt(_clamp(np_(a, "clamp_max"), None, hi)))
register(aten.clamp_.Tensor)(lambda a, lo=None, hi=None: _inplace(a, _clamp(np_(a, "clamp_"), lo, hi)))
register(aten.clamp_min_.default, aten.clamp_min_.Tensor)(lambda a, lo: _inplace(a, _clamp(np_(a, "clamp_min_"), lo, None)))
register(aten.clamp_max_.default, aten.clamp_max_.Tensor)(lambda a, hi: _inplace(a, _clamp(np_(a, "clamp_max_"), None, hi)))


@register(aten.elu_backward.default)
def elu_backward(grad, alpha, scale, input_scale, is_result, x_or_y):
    op = "elu_backward"
    return tt(A.elu_backward(np_(grad, op), alpha, scale, input_scale, is_result, np_(x_or_y, op)))


@register(aten.log_sigmoid_forward.default)
def log_sigmoid_forward(a):
    y, e = A.log_sigmoid(np_(a, "log_sigmoid_forward"))
    return tt(y), tt(e)


@register(aten.log_sigmoid_backward.default)
def log_sigmoid_backward(grad, a, buffer):
    return tt(A.log_sigmoid_backward(np_(grad, "log_sigmoid_backward"), np_(a, "log_sigmoid_backward")))


# -- losses ------------------------------------------------------------------------------------------------
_MEAN = 1


def _reduce(loss, reduction: int, op: str):
    if reduction == 0:
        return tt(loss)
    if reduction not in (1, 2):
        raise UnsupportedOpError(f"aten.{op} with reduction={reduction}: 0 (none), 1 (mean), 2 (sum) are defined")
    return tt(mean_dims(loss, None) if reduction == _MEAN else sum_dims(loss, None))


def _norm(x, reduction, scale=1.0):
    """The backward's factor: scale / numel for a mean (one rounding of the double), else scale."""
    return scale / x.size if reduction == _MEAN and x.size else scale


@register(aten.mse_loss.default)
def mse_loss(a, target, reduction=_MEAN):
    return _reduce(A.squared_error(np_(a, "mse_loss"), np_(target, "mse_loss")), reduction, "mse_loss")


@register(aten.mse_loss_backward.default)
def mse_loss_backward(grad, a, target, reduction):
    op = "mse_loss_backward"
    x = np_(a, op)
    return tt(A.squared_error_backward(np_(grad, op), x, np_(target, op), _norm(x, reduction, 2.0)))


def _beta(op, beta):
    if beta <= 0:  # (F.smooth_l1_loss calls l1_loss for beta = 0; torch refuses beta < 0)
        raise UnsupportedOpError(f"aten.{op} with beta={beta}: RepOps defines beta > 0 (F.smooth_l1_loss with "
                                 "beta=0 is l1_loss, which runs)")
    return beta


@register(aten.smooth_l1_loss.default)
def smooth_l1_loss(a, target, reduction=_MEAN, beta=1.0):
    op = "smooth_l1_loss"
    return _reduce(A.smooth_l1(np_(a, op), np_(target, op), _beta(op, beta)), reduction, op)


@register(aten.smooth_l1_loss_backward.default)
def smooth_l1_loss_backward(grad, a, target, reduction, beta):
    op = "smooth_l1_loss_backward"
    x = np_(a, op)
    return tt(A.smooth_l1_backward(np_(grad, op), x, np_(target, op), _beta(op, beta), _norm(x, reduction)))


@register(aten.huber_loss.default)
def huber_loss(a, target, reduction=_MEAN, delta=1.0):
    return _reduce(A.huber(np_(a, "huber_loss"), np_(target, "huber_loss"), delta), reduction, "huber_loss")


@register(aten.huber_loss_backward.default)
def huber_loss_backward(grad, a, target, reduction, delta):
    op = "huber_loss_backward"
    x = np_(a, op)
    return tt(A.huber_backward(np_(grad, op), x, np_(target, op), delta, _norm(x, reduction)))


def _weighted(loss, weight, op):
    from .reference import prims as P
    return loss if weight is None else P.mul(loss, np_(weight, op))


@register(aten.binary_cross_entropy.default)
def binary_cross_entropy(a, target, weight=None, reduction=_MEAN):
    """torch refuses a probability outside [0, 1] (or NaN): rule `domain` (repops/faults.py)."""
    op = "binary_cross_entropy"
    p = np_(a, op)
    faults.in_unit_interval(p, op)
    return _reduce(_weighted(A.binary_cross_entropy(p, np_(target, op)), weight, op), reduction, op)


@register(aten.binary_cross_entropy_backward.default)
def binary_cross_entropy_backward(grad, a, target, weight=None, reduction=_MEAN):
    from .reference import prims as P
    op = "binary_cross_entropy_backward"
    p = np_(a, op)
    g = _weighted(A.binary_cross_entropy_backward(np_(grad, op), p, np_(target, op)), weight, op)
    return tt(g if reduction != _MEAN else P.div(g, A.k(p.size)))


@register(aten.binary_cross_entropy_with_logits.default)
def binary_cross_entropy_with_logits(a, target, weight=None, pos_weight=None, reduction=_MEAN):
    op = "binary_cross_entropy_with_logits"
    pw = None if pos_weight is None else np_(pos_weight, op)
    return _reduce(_weighted(A.bce_with_logits(np_(a, op), np_(target, op), pw), weight, op), reduction, op)


# -- pow with a tensor exponent (Bloom's ALiBi slopes: base ** arange) --------------------------------------
def _float(t, op):
    """A float32 operand; an integer tensor by its to_f32 kernel (a dispute names the cast)."""
    if isinstance(t, torch.Tensor) and not t.is_floating_point():
        from .reference import integers as I
        from .reference import prims as P
        a = arr(t)
        return I.KERNELS[f"to_f32.{I.dtype_name(a)}"](a) if P.xp_of(a) is np and I.dtype_name(a) else a.astype(np.float32)
    return np_(t, op)


register(aten.pow.Tensor_Tensor)(lambda a, b: tt(A.pow(_float(a, "pow"), _float(b, "pow"))))
register(aten.pow.Scalar)(lambda a, b: tt(A.pow(np_(a, "pow"), _float(b, "pow"))))
register(aten.pow_.Tensor)(lambda a, b: _inplace(a, A.pow(np_(a, "pow_"), _float(b, "pow_"))))


@register(aten.pow_.Scalar)
def pow_scalar_(a, p):
    """x.pow_(p): aten.pow.Tensor_Scalar's definition, written back."""
    from .aten import REGISTRY
    return _inplace(a, arr(REGISTRY[aten.pow.Tensor_Scalar](a, p)))


# -- scans: float cumsum / cumprod in sequential order ---------------------------------------------------
def _scan(prim, op):
    """y[0] = x[0] (a copy), y[i] = prim(y[i-1], x[i]) along dim, one kernel per position in
    increasing order (torch's CPU loop: its bits for cumsum), the positions assembled by one
    place() copy (a CAT of the step outputs)."""
    from .aten import _result_dtype
    from .reference import prims as P

    def impl(a, dim, dtype=None):
        _result_dtype(op, dtype)
        x = np_(a, op)
        if x.ndim == 0 or x.shape[dim % x.ndim] <= 1 or x.size == 0:
            return tt(P.copy(x))
        d = dim % x.ndim
        at = lambda i: x[(slice(None),) * d + (slice(i, i + 1),)]  # noqa: E731
        acc = P.copy(at(0))
        steps = [acc]
        for i in range(1, x.shape[d]):
            acc = prim(acc, at(i))
            steps.append(acc)
        return tt(P.place(x.shape, d, [(i, 1, s) for i, s in enumerate(steps)]))
    return impl


def _register_scans():
    from .reference import prims as P
    register(aten.cumsum.default)(_scan(P.add, "cumsum"))
    register(aten.cumprod.default)(_scan(P.mul, "cumprod"))
    register(aten.cumsum_.default)(lambda a, dim, dtype=None: _inplace(a, arr(_scan(P.add, "cumsum_")(a, dim, dtype))))
    register(aten.cumprod_.default)(lambda a, dim, dtype=None: _inplace(a, arr(_scan(P.mul, "cumprod_")(a, dim, dtype))))


_register_scans()
