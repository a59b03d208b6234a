"""aten's rounding, remainder, IEEE and base-2/base-10 ops on RepOps: each the composition in
repops/reference/rounding.py (or activations.py's log1p/expm1). The prims torch's own
decompositions reach (prims.floor, prims.fmod, ...: copysign, frac, logaddexp, xlog1py and
soft_margin_loss decompose into them) run as their aten op (repops/mode.py: a prim's
impl_aten), so a trace names aten ops only. In-place variants copy the result back (one copy
kernel whose output is self). docs/NUMERICS.md §8, "Rounding, remainders, IEEE functions and
logarithms"."""
from __future__ import annotations

import math

import torch

from . import faults
from .aten import _inplace, np_, register, tensor, tt
from .errors import UnsupportedOpError
from .reference import activations as A
from .reference import prims as P
from .reference import rounding as R

aten = torch.ops.aten


UNARY = {"floor": P.floor, "ceil": R.ceil, "trunc": P.trunc, "fix": P.trunc, "round": P.rint, "exp2": R.exp2,
         "log2": R.log2, "log10": R.log10, "log1p": A.log1p, "expm1": A.expm1}
for _name, _fn in UNARY.items():
    register(getattr(aten, _name).default)(lambda a, _fn=_fn, _name=_name: tt(_fn(np_(a, _name))))
    register(getattr(aten, _name + "_").default)(lambda a, _fn=_fn, _name=_name: _inplace(a, _fn(np_(a, _name))))
register(aten.round.decimals)(lambda a, decimals=0: tt(R.round_decimals(np_(a, "round"), decimals)))
register(aten.round_.decimals)(lambda a, decimals=0: _inplace(a, R.round_decimals(np_(a, "round_"), decimals)))


def _binary(fn, name):
    """fn(a, b) as aten.<name> (both orders of tensor and number) and its in-place form."""
    out = lambda a, b: tt(fn(np_(a, name), np_(b, name)))  # noqa: E731
    inplace = lambda a, b: _inplace(a, fn(np_(a, name), np_(b, name)))  # noqa: E731
    return out, inplace


BINARY = {"fmod": R.fmod, "remainder": R.remainder, "fmax": R.fmax, "fmin": R.fmin, "nextafter": R.nextafter,
          "hypot": R.hypot}
for _name, _fn in BINARY.items():
    _out, _in = _binary(_fn, _name)
    register(*[getattr(getattr(aten, _name), o) for o in getattr(aten, _name).overloads() if "out" not in o])(_out)
    if hasattr(aten, _name + "_"):
        register(*[getattr(getattr(aten, _name + "_"), o) for o in getattr(aten, _name + "_").overloads()])(_in)

_floor_out, _floor_in = _binary(R.div_floor, "floor_divide")
register(aten.floor_divide.default, aten.floor_divide.Scalar)(_floor_out)
register(aten.floor_divide_.Tensor, aten.floor_divide_.Scalar)(_floor_in)
_MODES = {None: P.div, "trunc": R.div_trunc, "floor": R.div_floor}


def _mode(rounding_mode):
    if rounding_mode not in _MODES:
        raise UnsupportedOpError(f"div with rounding_mode={rounding_mode!r}: torch accepts None, 'trunc' or 'floor'")
    return _MODES[rounding_mode]


register(aten.div.Tensor_mode, aten.div.Scalar_mode)(
    lambda a, b, rounding_mode=None: tt(_mode(rounding_mode)(np_(a, "div"), np_(b, "div"))))
register(aten.div_.Tensor_mode, aten.div_.Scalar_mode)(
    lambda a, b, rounding_mode=None: _inplace(a, _mode(rounding_mode)(np_(a, "div_"), np_(b, "div_"))))


@register(aten.signbit.default)
def signbit(a):
    x = np_(a, "signbit")
    faults.not_nan(x, "signbit", "and torch's answer is that NaN's sign bit, which RepOps' canonical NaNs do not "
                                 "carry; replace NaNs first (torch.nan_to_num)")
    return tensor(R.signbit(x))


@register(aten.angle.default)
def angle(a):
    """A real x's argument: pi (float32's nearest) where x < 0, +0 elsewhere, a NaN itself
    (torch's angle_impl): two selects, no libm."""
    x = np_(a, "angle")
    return tt(P.select(P.eq(x, x), P.select(P.lt(x, A.k(0.0)), A.k(math.pi), A.k(0.0)), x))


@register(aten.frexp.Tensor)
def frexp(a):
    mantissa, exponent = R.frexp(np_(a, "frexp"))
    return tt(mantissa), tensor(exponent)


@register(aten._efficientzerotensor.default)
def efficient_zero_tensor(size, dtype=None, layout=None, device=None, pin_memory=None):
    """torch's zero tensor for a gradient known to be zero (sgn's and abs's backward): an
    ordinary tensor of +0, on the host one copy kernel of the constant 0 (so a decomposition
    describes it); another dtype or device: torch's zeros (exact)."""
    if dtype in (None, torch.float32) and torch.device(device or "cpu").type == "cpu":
        return tt(P.copy(P.const(0.0, tuple(size))))
    return torch.zeros(size, dtype=dtype, device=device)
