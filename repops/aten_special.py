"""aten's inverse trigonometric, hyperbolic and special functions on RepOps: each the composition
in repops/reference/trig.py, special.py or bessel.py (docs/NUMERICS.md §8), registered directly (torch's
decompositions of them reach prims.asin, prims.lgamma, ... whose eager kernels lead back to the
aten op, which RepOps would refuse). Backward passes are autograd's formulas over aten ops."""
from __future__ import annotations

import torch

from .aten import _binary, _inplace, _unary, _unary_inplace, np_, register, tt
from .errors import UnsupportedOpError
from .reference import bessel as B
from .reference import special as S
from .reference import trig as T

aten = torch.ops.aten


def _register(name, fn, inplace=True):
    """fn on one float tensor as aten.<name>, and <name>_ in place where aten has it."""
    register(getattr(aten, name).default)(_unary(fn, name))
    if inplace:
        register(getattr(aten, name + "_").default)(_unary_inplace(fn, name + "_"))


for _name in ("asin", "acos", "atan", "asinh", "acosh", "atanh", "sinh", "cosh", "tan"):
    _register(_name, getattr(T, _name))
# (expm1, log1p: repops/aten_math.py)
register(aten.atan2.default)(_binary(T.atan2, "atan2"))
register(aten.atan2_.default)(_binary(T.atan2, "atan2_", inplace=True))

# -- gamma family ---------------------------------------------------------------------------------------------------
_register("lgamma", S.lgamma)
_register("digamma", S.digamma)


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
_register("erfc", S.erfc)
_register("erfinv", S.erfinv)
_register("special_erfcx", S.erfcx, inplace=False)
_register("special_log_ndtr", S.log_ndtr, inplace=False)
_register("special_ndtri", S.ndtri, inplace=False)

# -- Bessel -----------------------------------------------------------------------------------------------------------
_register("i0", B.i0)
for _name, _fn in (("special_i0e", B.i0e), ("special_i1", B.i1), ("special_i1e", B.i1e),
                   ("special_modified_bessel_i0", B.i0), ("special_modified_bessel_i1", B.i1),
                   ("special_modified_bessel_k0", B.k0), ("special_modified_bessel_k1", B.k1),
                   ("special_scaled_modified_bessel_k0", B.k0e), ("special_scaled_modified_bessel_k1", B.k1e),
                   ("special_spherical_bessel_j0", B.spherical_bessel_j0),
                   ("special_bessel_j0", B.j0), ("special_bessel_j1", B.j1), ("special_bessel_y0", B.y0),
                   ("special_bessel_y1", B.y1)):
    _register(_name, _fn, inplace=False)
