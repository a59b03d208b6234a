"""aten's inverse trigonometric, hyperbolic and special functions on RepOps: each the composition
in repops/reference/trig.py, special.py or bessel.py (docs/NUMERICS.md §8), registered directly (torch's
decompositions of them reach prims.asin, prims.lgamma, ... whose eager kernels lead back to the
aten op, which RepOps would refuse). Backward passes are autograd's formulas over aten ops."""
from __future__ import annotations

import torch

from .aten import _inplace, np_, register, tt
from .errors import UnsupportedOpError
from .reference import bessel as B
from .reference import special as S
from .reference import trig as T

aten = torch.ops.aten


def _unary(name, fn, inplace=True):
    """fn on one float tensor as aten.<name>, and <name>_ in place where aten has it."""
    register(getattr(aten, name).default)(lambda a: tt(fn(np_(a, name))))
    if inplace:
        register(getattr(aten, name + "_").default)(lambda a: _inplace(a, fn(np_(a, name + "_"))))


for _name in ("asin", "acos", "atan", "asinh", "acosh", "atanh", "sinh", "cosh", "tan"):
    _unary(_name, getattr(T, _name))
# (expm1, log1p: repops/aten_math.py)
register(aten.atan2.default)(lambda a, b: tt(T.atan2(np_(a, "atan2"), np_(b, "atan2"))))
register(aten.atan2_.default)(lambda a, b: _inplace(a, T.atan2(np_(a, "atan2_"), np_(b, "atan2_"))))

# -- gamma family ---------------------------------------------------------------------------------------------------
_unary("lgamma", S.lgamma)
_unary("digamma", S.digamma)


def _polygamma(n, x):
    if n == 0:
        return S.digamma(x)
    if not 1 <= n <= S.POLYGAMMA_MAX:
        raise UnsupportedOpError(f"polygamma(n={n}): RepOps defines n = 0 .. {S.POLYGAMMA_MAX} (beyond, "
                                 "its binary32 series for zeta(n + 1, x) and the derivatives of cot lose accuracy); "
                                 "compute it outside repops.deterministic()")
    return S.polygamma(n, x)


register(aten.polygamma.default)(lambda n, a: tt(_polygamma(n, np_(a, "polygamma"))))
register(aten.polygamma_.default)(lambda a, n: _inplace(a, _polygamma(n, np_(a, "polygamma_"))))

# -- error function family ------------------------------------------------------------------------------------------
_unary("erfc", S.erfc)
_unary("erfinv", S.erfinv)
_unary("special_erfcx", S.erfcx, inplace=False)
_unary("special_log_ndtr", S.log_ndtr, inplace=False)
_unary("special_ndtri", S.ndtri, inplace=False)

# -- Bessel -----------------------------------------------------------------------------------------------------------
_unary("i0", B.i0)
for _name, _fn in (("special_i0e", B.i0e), ("special_i1", B.i1), ("special_i1e", B.i1e),
                   ("special_modified_bessel_i0", B.i0), ("special_modified_bessel_i1", B.i1),
                   ("special_modified_bessel_k0", B.k0), ("special_modified_bessel_k1", B.k1),
                   ("special_scaled_modified_bessel_k0", B.k0e), ("special_scaled_modified_bessel_k1", B.k1e),
                   ("special_spherical_bessel_j0", B.spherical_bessel_j0),
                   ("special_bessel_j0", B.j0), ("special_bessel_j1", B.j1), ("special_bessel_y0", B.y0),
                   ("special_bessel_y1", B.y1)):
    _unary(_name, _fn, inplace=False)
