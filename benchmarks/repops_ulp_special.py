"""Max ulp error of repops/reference/trig.py, special.py and bessel.py over random sweeps (the table in
docs/NUMERICS.md §8, "Inverse trigonometric, hyperbolic and special functions").

  python benchmarks/repops_ulp_special.py [--n 200000] [--only atan lgamma ...] [--torch] [--range LO HI]

--torch measures torch's own float32 CPU kernels on the same sweeps instead (the figures
NUMERICS.md quotes for torch); --range sweeps [LO, HI] (uniform) instead of each case's ranges.

Reference: float64 (numpy / math) where it has the function, else mpmath (25 digits) on at most
--n-mp inputs (mpmath's polygamma and erfinv take ~1 ms each). Inputs: uniform in each range,
and log-uniform where the range is marked "log". Error = |y - ref| / ulp(ref rounded to binary32),
over results that are normal binary32 numbers (subnormal results: absolute error, not counted);
a special result (inf/NaN) that differs counts as infinite.
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import mpmath as mp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from repops.conformance.ulp import mp_reference as _mp, sweep, ulps  # noqa: E402
from repops.reference import bessel as B  # noqa: E402
from repops.reference import special as S  # noqa: E402
from repops.reference import trig as T  # noqa: E402


def _math(f):
    return lambda x: np.array([f(float(v)) for v in x])


def _lgamma(v):
    return math.lgamma(v) if v != math.floor(v) or v > 0 else math.inf


def _ndtri(p):
    with mp.workdps(80):                               # 2p - 1 next to -1 for p ~ 2^-120
        return mp.sqrt(2) * mp.erfinv(2 * p - 1)


# name -> (function, reference(x64) -> float64, mpmath? (or "abs": mpmath, absolute error), [(lo, hi, log?)])
CASES = {
    "atan": (T.atan, np.arctan, False, [(-10, 10, False), (1e-30, 1e30, True)]),
    # atan2(x, reversed x): every sign and ratio combination of the sweep
    "atan2": (lambda x: T.atan2(x, x[::-1].copy()), lambda x: np.arctan2(x, x[::-1]), False,
              [(-10, 10, False), (1e-30, 1e30, True)]),
    "asin": (T.asin, np.arcsin, False, [(-1, 1, False), (1e-30, 1, True)]),
    "acos": (T.acos, np.arccos, False, [(-1, 1, False)]),
    "asinh": (T.asinh, np.arcsinh, False, [(-10, 10, False), (1e-30, 1e30, True)]),
    "acosh": (T.acosh, np.arccosh, False, [(1, 10, False), (1, 1e30, True)]),
    "atanh": (T.atanh, np.arctanh, False, [(-1, 1, False), (1e-30, 1, True)]),
    "sinh": (T.sinh, np.sinh, False, [(-10, 10, False), (1e-30, 89.4, True)]),
    "cosh": (T.cosh, np.cosh, False, [(-10, 10, False), (1e-30, 89.4, True)]),
    "tan": (T.tan, np.tan, False, [(-10, 10, False), (-100, 100, False)]),
    "lgamma": (S.lgamma, _math(_lgamma), False, [(0, 10, False), (1e-30, 1e30, True), (-10, -0.5, False)]),
    "digamma": (S.digamma, _mp(mp.digamma), True, [(0, 10, False), (10, 1e30, True), (-10, 0, False)]),
    **{f"polygamma{n}": (lambda x, n=n: S.polygamma(n, x), _mp(lambda v, n=n: mp.polygamma(n, v)), True,
                         [(0, 10, False), (10, 1e4, True), (-10, 0, False)]) for n in range(1, 6)},
    "erfc": (S.erfc, _math(math.erfc), False, [(-4, 10.05, False)]),
    "erfcx": (S.erfcx, _mp(lambda v: mp.exp(v * v) * mp.erfc(v)), True, [(-9, 10, False), (10, 1e30, True)]),
    "log_ndtr": (S.log_ndtr, _mp(lambda v: mp.log(mp.ncdf(v))), True, [(-40, 5, False)]),
    "erfinv": (S.erfinv, _mp(mp.erfinv), True, [(-1, 1, False)]),
    "ndtri": (S.ndtri, _mp(_ndtri), True, [(0, 1, False), (2.0 ** -120, 0.5, True)]),
    "i0": (B.i0, np.i0, False, [(-91, 91, False)]),
    "i0e": (B.i0e, lambda x: np.i0(x) * np.exp(-np.abs(x)), False, [(-700, 700, False)]),
    "i1": (B.i1, _mp(lambda v: mp.besseli(1, v)), True, [(-91, 91, False)]),
    "i1e": (B.i1e, _mp(lambda v: mp.besseli(1, v) * mp.exp(-abs(v))), True, [(-100, 100, False)]),
    "k0": (B.k0, _mp(lambda v: mp.besselk(0, v)), True, [(0, 3, False), (1e-30, 85, True)]),
    "k1": (B.k1, _mp(lambda v: mp.besselk(1, v)), True, [(0, 3, False), (1e-30, 85, True)]),
    "k0e": (B.k0e, _mp(lambda v: mp.besselk(0, v) * mp.exp(v)), True, [(0, 3, False), (1e-30, 1e30, True)]),
    "k1e": (B.k1e, _mp(lambda v: mp.besselk(1, v) * mp.exp(v)), True, [(0, 3, False), (1e-30, 1e30, True)]),
    # J and Y oscillate (ulps are unbounded next to their zeros): "abs" reports max |y - ref| / max(1, |ref|)
    **{f"bessel_{w}{nu}": (lambda x, f=getattr(B, f"bessel_{w}"), nu=nu: f(nu, x),
                           _mp(lambda v, g=getattr(mp, f"bessel{w}"), nu=nu: g(nu, v)), "abs",
                           [(0, 2.5, False), (2.5, 1000, False)]) for w in "jy" for nu in (0, 1)},
    "spherical_bessel_j0": (B.spherical_bessel_j0, lambda x: np.where(x == 0, 1.0, np.sin(x) / np.where(x == 0, 1, x)),
                            False, [(-10, 10, False)]),
}


def torch_kernel(name):
    """torch's float32 kernel of a CASES entry, on numpy arrays (--torch)."""
    import torch
    special = {"atan2": lambda t: torch.atan2(t, t.flip(0)),
               **{f"k{nu}{e}": getattr(torch.special, f"{'scaled_' if e else ''}modified_bessel_k{nu}")
                  for nu in (0, 1) for e in ("", "e")},
               **{f"polygamma{n}": (lambda t, n=n: torch.polygamma(n, t)) for n in range(1, 6)}}
    fn = special.get(name) or getattr(torch, name, None) or getattr(torch.special, name)
    return lambda x: fn(torch.from_numpy(x)).numpy()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--n-mp", type=int, default=20_000)
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--torch", action="store_true", help="measure torch's float32 kernels instead of RepOps'")
    ap.add_argument("--range", nargs=2, type=float, metavar=("LO", "HI"))
    args = ap.parse_args()
    rng = np.random.default_rng(2026)
    print("| function | inputs | max ulp |")
    print("|---|---|---:|")
    for name, (f, ref, slow, ranges) in CASES.items():
        n = min(args.n, args.n_mp) if slow else args.n
        f = torch_kernel(name) if args.torch else f
        for lo, hi, log in [(*args.range, False)] if args.range else ranges:
            x = sweep(lo, hi, n, log, rng)             # (drawn for every case: --only sees the full run's inputs)
            if args.only and name not in args.only:
                continue
            with np.errstate(all="ignore"):
                y, r = f(x), ref(x.astype(np.float64))
                e = np.abs(y - r) / np.maximum(1.0, np.abs(r)) if slow == "abs" else ulps(y, r)
            where = f"{'log-' if log else ''}uniform [{lo:g}, {hi:g}], {n // 1000}k"
            fig = f"{e.max():.2e} abs" if slow == "abs" else f"{e.max():.2f}"
            print(f"| {name} | {where} | {fig} (at {x[np.argmax(e)]!r}) |", flush=True)


if __name__ == "__main__":
    main()
