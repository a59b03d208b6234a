"""repops/reference/trig.py, special.py and bessel.py: error against float64 over sweeps (bounds a little
above the figures in docs/NUMERICS.md §8), special values bit for bit against torch, symmetry bit
for bit, the aten ops under repops.deterministic() (compiled CPU kernels) bit for bit the
reference, and every OpInfo sample of these ops native to rounding (no wrong answer)."""
import math
import warnings

import mpmath as mp
import numpy as np
import pytest
import torch

import repops
from repops.conformance.ulp import mp_reference as _mp, sweep as _sweep, ulps
from repops.errors import UnsupportedOpError
from repops.reference import activations as A
from repops.reference import bessel as B
from repops.reference import math as M
from repops.reference import special as S
from repops.reference import trig as T

F32 = np.float32
INF, NAN = np.inf, np.nan


def _lgamma64(x):
    return np.array([math.lgamma(float(v)) for v in x])


# name -> (f, float64 reference, [(lo, hi, log)], max ulp, inputs); measured maxima (200k inputs,
# 20k for mpmath references: benchmarks/repops_ulp_special.py) are in NUMERICS.md
ULP_CASES = {
    "atan": (T.atan, np.arctan, [(-10, 10, False), (1e-30, 1e30, True)], 1.0, 20000),
    "asin": (T.asin, np.arcsin, [(-1, 1, False), (1e-30, 1, True)], 1.3, 20000),
    "acos": (T.acos, np.arccos, [(-1, 1, False)], 1.1, 20000),
    "asinh": (T.asinh, np.arcsinh, [(-10, 10, False), (1e-30, 1e30, True)], 2.8, 20000),
    "acosh": (T.acosh, np.arccosh, [(1, 10, False), (1, 1e30, True)], 3.0, 20000),
    "atanh": (T.atanh, np.arctanh, [(-1, 1, False), (1e-30, 1, True)], 3.0, 20000),
    "sinh": (T.sinh, np.sinh, [(-10, 10, False), (1e-30, 89.4, True)], 2.6, 20000),
    "cosh": (T.cosh, np.cosh, [(-10, 10, False), (1e-30, 89.4, True)], 2.1, 20000),
    "sin": (M.sin, np.sin, [(-100, 100, False), (1e-30, 3.4e38, True)], 1.0, 20000),
    "cos": (M.cos, np.cos, [(-100, 100, False), (1e-30, 3.4e38, True)], 1.0, 20000),
    "tan": (T.tan, np.tan, [(-100, 100, False), (1e-30, 3.4e38, True)], 3.8, 20000),
    "lgamma": (S.lgamma, _lgamma64, [(1e-3, 10, False), (1e-30, 1e30, True)], 4.0, 20000),
    "erfc": (S.erfc, np.vectorize(math.erfc), [(-4, 10.05, False)], 4.3, 20000),
    "i0": (B.i0, np.i0, [(-91, 91, False)], 5.5, 20000),
    "i0e": (B.i0e, lambda x: np.i0(x) * np.exp(-np.abs(x)), [(-700, 700, False)], 3.5, 20000),
    "spherical_bessel_j0": (B.spherical_bessel_j0, lambda x: np.sin(x) / x, [(0.01, 10, False)], 2.4, 20000),
    "digamma": (S.digamma, _mp(mp.digamma), [(1e-3, 10, False), (10, 1e30, True)], 3.2, 1500),
    "erfcx": (S.erfcx, _mp(lambda v: mp.exp(v * v) * mp.erfc(v)), [(-9, 10, False), (10, 1e30, True)], 3.0, 1500),
    "erfinv": (S.erfinv, _mp(mp.erfinv), [(-1, 1, False)], 3.4, 600),
    "i1": (B.i1, _mp(lambda v: mp.besseli(1, v)), [(-91, 91, False)], 5.0, 1500),
    "i1e": (B.i1e, _mp(lambda v: mp.besseli(1, v) * mp.exp(-abs(v))), [(-100, 100, False)], 2.8, 1500),
    "k0": (B.k0, _mp(lambda v: mp.besselk(0, v)), [(1e-3, 3, False), (1e-30, 85, True)], 4.8, 1000),
    "k1": (B.k1, _mp(lambda v: mp.besselk(1, v)), [(1e-3, 3, False), (1e-30, 85, True)], 3.6, 1000),
    "k0e": (B.k0e, _mp(lambda v: mp.besselk(0, v) * mp.exp(v)), [(1e-3, 3, False), (1e-30, 1e30, True)], 5.0, 1000),
    "k1e": (B.k1e, _mp(lambda v: mp.besselk(1, v) * mp.exp(v)), [(1e-3, 3, False), (1e-30, 1e30, True)], 3.9, 1000),
    # (negative x only for odd n: psi^(n) of even n has zeros there, where ulps mean nothing)
    **{f"polygamma{n}": (lambda x, n=n: S.polygamma(n, x), _mp(lambda v, n=n: mp.polygamma(n, v)),
                         [(1e-3, 10, False), (10, 1e4, True)] + ([(-10, -1e-3, False)] if n % 2 else []), bound, 300)
       for n, bound in ((1, 7.0), (2, 5.6), (3, 12.5), (4, 10.5), (5, 18.0))},
}


def test_mpmath_references_run_at_25_digits():
    """(The sweeps' mpmath references once ran at mpmath's default 15 digits: the precision was
    set around building the function, not around calling it.)"""
    assert _mp(lambda v: mp.mpf(mp.mp.dps))(F32([0.0])).tolist() == [25.0]


@pytest.mark.parametrize("name", sorted(ULP_CASES))
def test_error_against_float64_is_within_the_measured_bound(name):
    f, ref, ranges, bound, n = ULP_CASES[name]
    for lo, hi, log in ranges:
        x = _sweep(lo, hi, n, log)
        x = x[x != np.floor(x)] if name.startswith("polygamma") else x
        err = ulps(f(x), ref(x.astype(np.float64)))
        assert err.max() <= bound, f"{name} on [{lo}, {hi}]: {err.max():.2f} ulp at {x[np.argmax(err)]!r}"


def test_sin_and_cos_are_within_one_ulp_where_x_comes_closest_to_a_multiple_of_half_pi():
    """Where the result is tiny beside x (the reduction cancels ~30 bits: 16367173 2^72 is the
    closest binary32 of all: benchmarks/sincos_worst_cases.py), and the next best per binade."""
    x = F32([16367173 * 2.0 ** 72, 2.19993846e+10, 252.898209, 4.71238899, 52516.4, 1.52278899e+12,
             4.63818338e+25, 505.796417, 2.0 ** 127 * 1.9999999])
    for f, ref in ((M.sin, mp.sin), (M.cos, mp.cos)):
        err = ulps(f(x), _mp(ref)(x))
        assert err.max() <= 1.0, f"{f.__name__}: {err.max():.2f} ulp at {x[np.argmax(err)]!r}"


def test_atan2_error_is_within_one_and_a_half_ulps_over_every_quadrant():
    y, x = _sweep(-10, 10, 20000, seed=1), _sweep(-10, 10, 20000, seed=2)
    assert ulps(T.atan2(y, x), np.arctan2(y.astype(np.float64), x.astype(np.float64))).max() <= 1.5


@pytest.mark.parametrize("f,ref", [(S.lgamma, _lgamma64), (S.digamma, _mp(mp.digamma))])
def test_gamma_family_on_negative_arguments_is_accurate_in_absolute_terms(f, ref):
    """Next to the zeros on the negative axis the reflection's cancellation costs relative
    accuracy (NUMERICS.md); the absolute error stays at binary32 rounding of the terms."""
    x = _sweep(-10, -1e-3, 1500, seed=3)
    x = x[x != np.floor(x)]
    r = ref(x.astype(np.float64))
    assert (np.abs(f(x) - r) <= 2e-6 * np.maximum(1.0, np.abs(r))).all()


@pytest.mark.parametrize("nu", [0, 1])
def test_bessel_j_and_y_are_accurate_in_absolute_terms(nu):
    """J and Y oscillate: next to their zeros ulps mean nothing; the error is binary32 rounding of
    terms of size max(1, |f|) (measured: <= 2.9e-7, Y0 below 1/2; torch's float32 kernels: up to 8.2e-7,
    benchmarks/repops_ulp_special.py --torch)."""
    x = np.concatenate([_sweep(1e-3, 2.5, 600, seed=9), _sweep(2.5, 1000, 600, seed=10)])
    for f, ref in ((B.bessel_j, mp.besselj), (B.bessel_y, mp.bessely)):
        r = _mp(lambda v: ref(nu, v))(x)
        assert (np.abs(f(nu, x) - r) <= 4e-7 * np.maximum(1.0, np.abs(r))).all()


def test_ndtri_keeps_relative_accuracy_in_the_tail():
    p = _sweep(2.0 ** -120, 0.5, 400, log=True)
    with mp.workdps(80):
        r = np.array([float(mp.sqrt(2) * mp.erfinv(2 * mp.mpf(float(v)) - 1)) for v in p])
    assert ulps(S.ndtri(p), r).max() <= 3.5


# -- special values, bit for bit against torch ---------------------------------------------------------------------
EDGES = F32([0.0, -0.0, INF, -INF, NAN, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 1e-40, -1e-40, 1.0000001, -1.0000001,
             3.0, -3.0, 1e30, -1e30])
TORCH = {
    "asin": (T.asin, torch.asin), "acos": (T.acos, torch.acos), "atan": (T.atan, torch.atan),
    "asinh": (T.asinh, torch.asinh), "acosh": (T.acosh, torch.acosh), "atanh": (T.atanh, torch.atanh),
    "sinh": (T.sinh, torch.sinh), "cosh": (T.cosh, torch.cosh), "tan": (T.tan, torch.tan),
    "sin": (M.sin, torch.sin), "cos": (M.cos, torch.cos),
    "expm1": (A.expm1, torch.expm1), "log1p": (A.log1p, torch.log1p),
    "lgamma": (S.lgamma, torch.lgamma), "digamma": (S.digamma, torch.digamma),
    "erfc": (S.erfc, torch.erfc), "erfcx": (S.erfcx, torch.special.erfcx),
    "log_ndtr": (S.log_ndtr, torch.special.log_ndtr),
    "erfinv": (S.erfinv, torch.erfinv), "ndtri": (S.ndtri, torch.special.ndtri),
    "i0e": (B.i0e, torch.special.i0e), "i1": (B.i1, torch.special.i1), "i1e": (B.i1e, torch.special.i1e),
    "spherical_bessel_j0": (B.spherical_bessel_j0, torch.special.spherical_bessel_j0),
    "k0": (B.k0, torch.special.modified_bessel_k0), "k1": (B.k1, torch.special.modified_bessel_k1),
    **{f"bessel_{w}": (getattr(B, w), getattr(torch.special, f"bessel_{w}")) for w in ("j0", "j1", "y0", "y1")},
    "k0e": (B.k0e, torch.special.scaled_modified_bessel_k0), "k1e": (B.k1e, torch.special.scaled_modified_bessel_k1),
    **{f"polygamma{n}": (lambda x, n=n: S.polygamma(n, x), lambda t, n=n: torch.polygamma(n, t)) for n in range(1, 6)},
}
# The inputs whose results are exact (or a special value) in torch: every function there gives
# torch's bits. Elsewhere both round, and may differ in the last bits (the sweeps bound RepOps).
EXACT = {
    "asin": [0.0, -0.0, INF, -INF, NAN, 2.0, -2.0, 1.0000001, 1e-40, -1e-40], "acos": [1.0, INF, NAN, 2.0, -1.0000001],
    "atan": [0.0, -0.0, INF, -INF, NAN, 1e-40, -1e-40, 1.0],
    "asinh": [0.0, -0.0, INF, -INF, NAN, 1e-40, -1e-40], "acosh": [1.0, INF, -INF, NAN, 0.5, 0.0, -1.0],
    "atanh": [0.0, -0.0, 1.0, -1.0, INF, NAN, 2.0, -1.0000001, 1e-40, -1e-40],
    "sinh": [0.0, -0.0, INF, -INF, NAN, 1e-40, -1e-40, 1e30], "cosh": [0.0, -0.0, INF, -INF, NAN, 1e30, -1e30],
    "tan": [0.0, -0.0, INF, -INF, NAN, 1e-40, -1e-40],
    "sin": [0.0, -0.0, INF, -INF, NAN, 1e-40, -1e-40], "cos": [0.0, -0.0, INF, -INF, NAN],
    "expm1": [0.0, -0.0, INF, -INF, NAN, 1e-40, 1e30, -1e30], "log1p": [0.0, -0.0, INF, -1.0, -2.0, NAN, 1e-40, -1e-40],
    "lgamma": [0.0, -0.0, INF, -INF, NAN, 1.0, 2.0, -1.0, -2.0, 1e30, -1e30],
    "digamma": [0.0, -0.0, INF, -INF, NAN, -1.0, -2.0, -1e30],
    "erfc": [INF, -INF, NAN, 0.0, -0.0, 1e30, -1e30], "erfcx": [INF, -INF, NAN, 0.0, -0.0, -1e30],
    "log_ndtr": [INF, -INF, NAN, 1e30],
    "erfinv": [0.0, -0.0, 1.0, -1.0, INF, -INF, NAN, 2.0, -1.0000001],
    "ndtri": [0.0, 1.0, 0.5, -1.0, 2.0, INF, -INF, NAN],
    "i0e": [INF, -INF, NAN], "i1": [0.0, -0.0, NAN, INF, -INF], "i1e": [0.0, -0.0, INF, -INF, NAN],
    "spherical_bessel_j0": [0.0, -0.0, INF, -INF, NAN],
    "bessel_j0": [0.0, -0.0, INF, -INF, NAN, 1e-40], "bessel_j1": [0.0, -0.0, INF, -INF, NAN],
    "bessel_y0": [0.0, -0.0, -1.0, INF, -INF, NAN], "bessel_y1": [0.0, -0.0, -1.0, INF, -INF, NAN, 1e-40],
    **{name: [0.0, -0.0, -1.0, INF, -INF, NAN, 100.0] + ([1e-40] if name in ("k0", "k1") else [])
       for name in ("k0", "k1", "k0e", "k1e")},
    **{f"polygamma{n}": [NAN, INF, 0.0, -0.0] + ([-INF, -2.0] if n > 1 else []) for n in range(1, 6)},
}


def _same(mine, native):
    """Bits equal; any NaN for a NaN (torch's NaN sign is the C library's; RepOps' is canonical)."""
    mine, native = np.asarray(mine, F32), np.asarray(native, F32)
    return np.where(np.isnan(native), np.isnan(mine), mine.view(np.uint32) == native.view(np.uint32))


@pytest.mark.parametrize("name", sorted(TORCH))
def test_special_values_are_torch_bit_for_bit(name):
    f, native = TORCH[name]
    x = F32(EXACT[name])
    with np.errstate(all="ignore"):
        mine = f(x)
    ok = _same(mine, native(torch.from_numpy(x)).numpy())
    assert ok.all(), f"{name}: {list(zip(x[~ok], mine[~ok]))}"
    assert (np.asarray(mine).view(np.uint32)[np.isnan(mine)] == 0x7FC00000).all()  # canonical NaN


def test_atan2_signed_zeros_and_infinities_are_torch_bit_for_bit():
    """Every pair of +-0, +-1, +-2, +-inf, NaN; where |y| = |x| is finite and nonzero the result
    is +-pi/4 or +-3pi/4 rounded, and torch's atan2(1, 1) is 1 ulp below RN(pi/4): RepOps rounds."""
    v = F32([0.0, -0.0, 1.0, -1.0, INF, -INF, NAN, 2.0, -2.0])
    y, x = np.meshgrid(v, v, indexing="ij")
    mine, native = T.atan2(y, x), torch.atan2(torch.from_numpy(y), torch.from_numpy(x)).numpy()
    diagonal = (np.abs(y) == np.abs(x)) & np.isfinite(x) & (x != 0)
    assert _same(mine, native)[~diagonal].all()
    quarter = F32(np.pi / 4)
    assert (mine[diagonal] == np.where(x[diagonal] > 0, quarter, F32(3 * np.pi / 4)) * np.sign(y[diagonal])).all()


def test_where_torch_float32_rounds_badly_repops_gives_the_true_pole_or_value():
    """Documented divergences (NUMERICS.md): torch's float trigamma at negative integers (sinf(pi x)
    is not 0 there) and its i0/i1 past exp's overflow (x > 88.7) give garbage / inf."""
    assert (S.polygamma(1, F32([-1.0, -2.0, -100.0])) == INF).all()
    big = F32([1e30, 1e20])
    assert ulps(S.polygamma(1, big), big.astype(np.float64) ** -1).max() <= 1
    # (the tail leads with p^(s-1): trigamma(1e30) = 1e-30, not an underflowed p^2 times w)
    assert np.isfinite(B.i0(F32([89.5, 91.0]))).all() and np.isfinite(B.i1(F32([-89.5]))).all()


# -- symmetry --------------------------------------------------------------------------------------------------------
ODD = {"sin": M.sin, "atan": T.atan, "asin": T.asin, "asinh": T.asinh, "atanh": T.atanh, "sinh": T.sinh,
       "erfinv": S.erfinv, "i1e": B.i1e, "i1": B.i1, "bessel_j1": B.j1}
EVEN = {"cos": M.cos, "cosh": T.cosh, "i0": B.i0, "i0e": B.i0e, "spherical_bessel_j0": B.spherical_bessel_j0,
        "bessel_j0": B.j0}


@pytest.mark.parametrize("name", sorted(ODD) + sorted(EVEN))
def test_odd_and_even_functions_are_symmetric_bit_for_bit(name):
    """Each computes from |x| and restores the sign by a select (no path depends on x's sign)."""
    x = np.concatenate([_sweep(1e-30, 1, 3000, log=True), _sweep(1, 90, 3000)])
    x = x[x < 1] if name in ("asin", "atanh", "erfinv") else x
    f = ODD.get(name) or EVEN[name]
    with np.errstate(all="ignore"):
        pos, neg = f(x), f(-x)
    want = -pos if name in ODD else pos
    assert (neg.view(np.uint32) == want.view(np.uint32)).all()


# -- the aten ops, and PyTorch's own samples -------------------------------------------------------------------------
ATEN = {
    torch.asin: T.asin, torch.acos: T.acos, torch.atan: T.atan, torch.asinh: T.asinh, torch.acosh: T.acosh,
    torch.atanh: T.atanh, torch.sinh: T.sinh, torch.cosh: T.cosh, torch.tan: T.tan, torch.expm1: A.expm1,
    torch.log1p: A.log1p, torch.lgamma: S.lgamma, torch.digamma: S.digamma, torch.erfc: S.erfc,
    torch.erfinv: S.erfinv, torch.special.erfcx: S.erfcx, torch.special.log_ndtr: S.log_ndtr,
    torch.special.ndtri: S.ndtri, torch.i0: B.i0, torch.special.i0e: B.i0e, torch.special.i1: B.i1,
    torch.special.i1e: B.i1e, torch.special.spherical_bessel_j0: B.spherical_bessel_j0,
    torch.special.modified_bessel_i0: B.i0, torch.special.modified_bessel_i1: B.i1,
    torch.special.modified_bessel_k0: B.k0, torch.special.modified_bessel_k1: B.k1,
    torch.special.scaled_modified_bessel_k0: B.k0e, torch.special.scaled_modified_bessel_k1: B.k1e,
    torch.special.bessel_j0: B.j0, torch.special.bessel_j1: B.j1, torch.special.bessel_y0: B.y0,
    torch.special.bessel_y1: B.y1,
}


@pytest.mark.parametrize("op", list(ATEN), ids=lambda f: f.__name__)
def test_aten_op_on_the_cpu_backend_is_the_reference_bit_for_bit(op):
    x = torch.from_numpy(np.concatenate([_sweep(-12, 12, 500, seed=4), F32([0.0, -0.0, INF, -INF, NAN, 0.3])]))
    with repops.deterministic():
        got = op(x)
    with np.errstate(all="ignore"):
        want = ATEN[op](x.numpy())
    assert (got.numpy().view(np.uint32) == want.view(np.uint32)).all()


@pytest.mark.parametrize("backend", ["cpu", "cuda-emu"])
def test_compositions_run_the_same_bits_on_the_emulated_cuda_backend(backend):
    """Compositions of existing primitives: the CUDA kernels (emulated) give the reference's bits."""
    x = torch.from_numpy(np.concatenate([_sweep(-9, 9, 64, seed=7), F32([0.0, -0.0, INF, NAN])]))
    u = torch.from_numpy(_sweep(-1, 1, 68, seed=8))
    with repops.deterministic(backend=backend):
        got = [torch.lgamma(x), torch.polygamma(2, x), torch.atan2(x, u), torch.erfinv(u), torch.special.i1e(x),
               torch.special.log_ndtr(x), torch.acosh(x), torch.tan(x)]
    with np.errstate(all="ignore"):
        xs, us = x.numpy(), u.numpy()
        want = [S.lgamma(xs), S.polygamma(2, xs), T.atan2(xs, us), S.erfinv(us), B.i1e(xs), S.log_ndtr(xs),
                T.acosh(xs), T.tan(xs)]
    for g, w in zip(got, want):
        assert (g.numpy().view(np.uint32) == w.view(np.uint32)).all()


def test_atan2_polygamma_and_in_place_variants_are_the_reference():
    y, x = torch.from_numpy(_sweep(-5, 5, 300, seed=5)), torch.from_numpy(_sweep(-5, 5, 300, seed=6))
    with repops.deterministic():
        a = torch.atan2(y, x)
        p = torch.polygamma(3, x)
        z = x.clone().asinh_()
    assert (a.numpy().view(np.uint32) == T.atan2(y.numpy(), x.numpy()).view(np.uint32)).all()
    assert (p.numpy().view(np.uint32) == S.polygamma(3, x.numpy()).view(np.uint32)).all()
    assert (z.numpy().view(np.uint32) == T.asinh(x.numpy()).view(np.uint32)).all()


def test_polygamma_of_a_high_order_is_refused_with_the_reason():
    with pytest.raises(UnsupportedOpError, match=r"polygamma\(n=9\).*n = 0 \.\. 8"):
        with repops.deterministic():
            torch.polygamma(9, torch.ones(3))


OPINFOS = ["acos", "acosh", "asin", "asinh", "atan", "atan2", "atanh", "cosh", "digamma", "erfc", "erfinv", "expm1",
           "i0", "lgamma", "log1p", "logaddexp", "mvlgamma.mvlgamma_p_1", "mvlgamma.mvlgamma_p_3",
           "mvlgamma.mvlgamma_p_5", "nn.functional.soft_margin_loss", "polygamma.polygamma_n_0",
           "polygamma.polygamma_n_1", "polygamma.polygamma_n_2", "polygamma.polygamma_n_3", "polygamma.polygamma_n_4",
           "sinh", "special.erfcx", "special.i0e", "special.i1", "special.i1e", "special.log_ndtr",
           "special.modified_bessel_i0", "special.modified_bessel_i1", "special.modified_bessel_k0",
           "special.modified_bessel_k1", "special.scaled_modified_bessel_k0", "special.scaled_modified_bessel_k1",
           "special.ndtri", "special.bessel_j0", "special.bessel_j1", "special.bessel_y0", "special.bessel_y1",
           "special.polygamma.special_polygamma_n_0", "special.spherical_bessel_j0", "special.xlog1py", "tan"]


@pytest.mark.xdist_group("trig_special_opinfo")
def test_every_opinfo_sample_of_these_ops_passes_forward_and_backward():
    """All samples (not only test_opinfo's first two), forward and gradients, 1 and 2 threads."""
    from repops.conformance import harness as H
    ops = {H.opinfo_id(o): o for o in H.float32_opinfos()}
    failed = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in OPINFOS:
            outcome, ran = H.check_opinfo(ops[name])
            if outcome.status != H.PASS or not ran:
                failed[name] = (outcome.status, ran, outcome.detail)
    assert not failed, failed
