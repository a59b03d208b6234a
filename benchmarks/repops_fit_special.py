"""Least-squares fits (float64, against mpmath) of the polynomials in repops/reference/trig.py,
special.py and bessel.py, rounded to binary32; prints each as hex bit patterns (highest degree
first) with the fit's max weighted error after rounding.
  python benchmarks/repops_fit_special.py [NAME[:degree] ...]"""
from __future__ import annotations

import sys

import mpmath as mp
import numpy as np

mp.mp.dps = 40


def fit(f, lo, hi, deg, weight=lambda v: 1.0, n=3000):
    """min sum (w(v) (p(v) - f(v)))^2 over Chebyshev nodes of [lo, hi]; p in the monomial
    basis of v (the variable the code evaluates in). Returns binary32 coefficients, highest first."""
    lo, hi = float(lo), float(hi)
    k = np.arange(n)
    v = (lo + hi) / 2 + (hi - lo) / 2 * np.cos(np.pi * (k + 0.5) / n)
    y = np.array([float(f(mp.mpf(float(t)))) for t in v])
    w = np.array([float(weight(t)) for t in v])
    scale = max(abs(lo), abs(hi))
    V = np.vander(v / scale, deg + 1)                  # columns: (v/s)^deg .. 1
    c, *_ = np.linalg.lstsq(V * w[:, None], y * w, rcond=None)
    c = c / scale ** np.arange(deg, -1, -1)
    c32 = c.astype(np.float32)
    p = np.zeros_like(v)
    for ci in c32.astype(np.float64):
        p = p * v + ci
    err = np.max(np.abs((p - y) * w))
    return c32, err


def show(name, c32, err):
    print(f"{name}: max weighted error {err:.3g}")
    print("  [c(b) for b in (" + ", ".join(f"0x{int(b):08X}" for b in c32.view(np.uint32)) + ")]")


def _tail(g):
    """f(v) for v = z (the square): g(sqrt(z)) with the z -> 0 limit taken in mpmath."""
    return lambda z: g(mp.sqrt(z)) if z > 0 else g(mp.mpf(2) ** -60)


FITS = {
    # atan(t) = t + t^3 P(t^2), |t| <= 7/16; weight z: P's error reaches atan / t scaled by z
    "ATAN_P": lambda d=6: fit(_tail(lambda t: (mp.atan(t) - t) / t ** 3), 0, (7 / 16) ** 2, d, lambda z: z),
    # asin(t) = t + t^3 P(t^2), |t| <= 1/2
    "ASIN_P": lambda d=6: fit(_tail(lambda t: (mp.asin(t) - t) / t ** 3), 0, 0.25, d, lambda z: z),
    # sin(pi h) = h S(h^2), cos(pi h) = C(h^2), |h| <= 1/4 (relative)
    "SINPI_S": lambda d=4: fit(_tail(lambda h: mp.sin(mp.pi * h) / h), 0, 1 / 16, d, lambda z: 1 / mp.pi),
    "COSPI_C": lambda d=4: fit(_tail(lambda h: mp.cos(mp.pi * h)), 0, 1 / 16, d, lambda z: 1.0),
    # lgamma(2 + t) = t (t + 1) H(t), t in [-1.5, 1] (x in [0.5, 3]); relative to H
    "LGAMMA_H": lambda d=18: fit(lambda t: (mp.loggamma(2 + t) / (t * (t + 1))) if abs(t) > 1e-12 and abs(t + 1) > 1e-12
                                 else (mp.digamma(2) if abs(t) <= 1e-12 else -mp.digamma(1)),
                                 -1.5, 1.0, d, lambda t: 1 / float(mp.loggamma(2 + t) / (t * (t + 1))) if abs(t) > 1e-9
                                 and abs(t + 1) > 1e-9 else 2.0),
    # lgamma(x) = (x - 1/2)(log x - 1) + LG_C + z W(z^2), z = 1/x, x >= 8
    "LGAMMA_W": lambda d=3: fit(_tail(lambda z: (mp.loggamma(1 / z) - (1 / z - mp.mpf(1) / 2) * (mp.log(1 / z) - 1)
                                                 - (mp.log(2 * mp.pi) / 2 - mp.mpf(1) / 2)) / z), 0, 1 / 64, d),
    # digamma(x) = t D(t), t = x - x0 (x0 the positive root), x in [1, 2]
    "DIGAMMA_D": lambda d=10: fit(lambda t: mp.digamma(X0 + t) / t if abs(t) > 1e-12 else mp.zeta(2, X0),
                                  1 - float(X0), 2 - float(X0), d,
                                  lambda t: 1 / abs(float(mp.digamma(X0 + t) / t)) if abs(t) > 1e-12 else 1.0),
    # erf(t) = t E(t^2), |t| < 1/2 (relative); erfc = 1 - t E there
    "ERF_E": lambda d=5: fit(_tail(lambda t: mp.erf(t) / t), 0, 0.25, d),
    # erfcx(x) = A(x - 5/4) on [1/2, 2] (relative)
    "ERFCX_A": lambda d=13: fit(lambda t: mp.exp((t + 1.25) ** 2) * mp.erfc(t + 1.25), -0.75, 0.75, d,
                                lambda t: 1 / float(mp.exp((t + 1.25) ** 2) * mp.erfc(t + 1.25))),
    # x erfcx(x) = B(1/x^2) on [2, 4] and C(1/x^2) on [4, inf) (relative)
    "ERFCX_B": lambda d=8: fit(_xerfcx, 1 / 16, 1 / 4, d, lambda u: 1 / float(_xerfcx(mp.mpf(u)))),
    "ERFCX_C": lambda d=6: fit(_xerfcx, 0, 1 / 16, d, lambda u: 1 / float(_xerfcx(mp.mpf(u)))),
    # erfinv(y) = y G(L), L = -log(1 - y^2) (Giles' variable): G1(L - 5/2) on L < 5, G2(sqrt(L) - 3) on
    # 5 <= L <= 104 (ndtri's smallest p); relative. Newton steps polish the result.
    "ERFINV_G1": lambda d=9: fit(lambda t: _erfinv_ratio(t + 2.5), -2.5, 2.5, d,
                                 lambda t: 1 / float(_erfinv_ratio(mp.mpf(t) + 2.5))),
    "ERFINV_G2": lambda d=12: fit(lambda s: _erfinv_ratio((s + 3) ** 2), mp.sqrt(5) - 3, mp.sqrt(104) - 3, d,
                                  lambda s: 1 / float(_erfinv_ratio((mp.mpf(s) + 3) ** 2))),
    # sqrt(x) e^-x I_nu(x) = Q_nu(1/x) for x >= 8 (relative)
    "BESSEL_I0E": lambda d=7: fit(lambda t: _scaled_i(0, t), 0, 1 / 8, d),
    "BESSEL_I1E": lambda d=7: fit(lambda t: _scaled_i(1, t), 0, 1 / 8, d),
    # K0(x) = F0(x^2) - log(x/2) I0(x), K1(x) = 1/x + log(x/2) I1(x) + x F1(x^2) on (0, 1] (absolute)
    "BESSEL_K0F": lambda d=4: fit(lambda z: _k_small(0, z), 0, 1, d),
    "BESSEL_K1F": lambda d=5: fit(lambda z: _k_small(1, z), 0, 1, d),
    # sqrt(x) e^x K_nu(x) = R_nu(1/x) for x > 1 (relative)
    "BESSEL_K0E": lambda d=10: fit(lambda t: _scaled_k(0, t), 0, 1, d, lambda t: 1 / float(_scaled_k(0, mp.mpf(t)))),
    "BESSEL_K1E": lambda d=10: fit(lambda t: _scaled_k(1, t), 0, 1, d, lambda t: 1 / float(_scaled_k(1, mp.mpf(t)))),
    # x <= 5/2: J0 = (x - j01)(x + j01) RJ0(x^2), J1 = x (x - j11)(x + j11) RJ1(x^2) (relative);
    # Y0 = (2/pi) log(x) J0 + RY0(x^2), Y1 = (2/pi)(J1 log x - 1/x) + x RY1(x^2) (absolute)
    "BESSEL_RJ0": lambda d=6: fit(lambda z: _rj(0, z), 0, 6.25, d, lambda z: 1 / float(_rj(0, mp.mpf(z)))),
    "BESSEL_RJ1": lambda d=6: fit(lambda z: _rj(1, z), 0, 6.25, d, lambda z: 1 / float(_rj(1, mp.mpf(z)))),
    "BESSEL_RY0": lambda d=6: fit(lambda z: _ry(0, z), 0, 6.25, d),
    "BESSEL_RY1": lambda d=6: fit(lambda z: _ry(1, z), 0, 6.25, d),
    # x > 5/2: J_nu, Y_nu = sqrt(2/(pi x)) (P cos, sin chi -+ Q sin, cos chi), chi = x - (2nu + 1)pi/4;
    # P(u) and x Q(u) with u = 25/x^2 in (0, 4] (relative)
    **{f"BESSEL_{w}{nu}": (lambda d=10, w=w, nu=nu: fit(lambda u: _pq(w, nu, u), 0, 4, d,
                                                        lambda u: 1 / abs(float(_pq(w, nu, mp.mpf(u))))))
       for w in "PQ" for nu in (0, 1)},
}


def _rj(nu, z):
    x = mp.sqrt(z) if z > 0 else mp.mpf(10) ** -20
    j = mp.besseljzero(nu, 1)
    return mp.besselj(nu, x) / ((x - j) * (x + j) * (x if nu else 1))


def _ry(nu, z):
    x = mp.sqrt(z) if z > 0 else mp.mpf(10) ** -20
    if nu == 0:
        return mp.bessely(0, x) - 2 / mp.pi * mp.log(x) * mp.besselj(0, x)
    return (mp.bessely(1, x) - 2 / mp.pi * (mp.besselj(1, x) * mp.log(x) - 1 / x)) / x


def _pq(w, nu, u):
    """Hankel's P and x Q at x = 5/sqrt(u) (u -> 0: P = 1, x Q = (4 nu^2 - 1)/8)."""
    if u == 0:
        return mp.mpf(1) if w == "P" else (4 * nu * nu - mp.mpf(1)) / 8
    x = 5 / mp.sqrt(u)
    chi = x - (2 * nu + 1) * mp.pi / 4
    j, y, s = mp.besselj(nu, x), mp.bessely(nu, x), mp.sqrt(mp.pi * x / 2)
    if w == "P":
        return s * (j * mp.cos(chi) + y * mp.sin(chi))
    return x * s * (y * mp.cos(chi) - j * mp.sin(chi))


def _k_small(nu, z):
    if z == 0:
        return -mp.euler if nu == 0 else (2 * mp.euler - 1) / 4   # limits
    x = mp.sqrt(z)
    if nu == 0:
        return mp.besselk(0, x) + mp.log(x / 2) * mp.besseli(0, x)
    return (mp.besselk(1, x) - 1 / x - mp.log(x / 2) * mp.besseli(1, x)) / x


def _scaled_k(nu, t):
    if t == 0:
        return mp.sqrt(mp.pi / 2)
    x = 1 / t
    return mp.sqrt(x) * mp.exp(x) * mp.besselk(nu, x)


def _scaled_i(nu, t):
    if t == 0:
        return 1 / mp.sqrt(2 * mp.pi)
    x = 1 / t
    return mp.sqrt(x) * mp.exp(-x) * mp.besseli(nu, x)


def _erfinv_ratio(L):
    """erfinv(y)/y at y = sqrt(1 - e^-L); sqrt(pi)/2 at L = 0."""
    if L <= 0:
        return mp.sqrt(mp.pi) / 2
    with mp.workdps(120):
        y = mp.sqrt(-mp.expm1(-L))
        return mp.erfinv(y) / y


def _xerfcx(u):
    """x erfcx(x) at x = 1/sqrt(u); its limit 1/sqrt(pi) at u = 0."""
    if u == 0:
        return 1 / mp.sqrt(mp.pi)
    x = 1 / mp.sqrt(u)
    return x * mp.exp(x * x) * mp.erfc(x)


X0 = mp.findroot(mp.digamma, 1.46)


if __name__ == "__main__":
    names = sys.argv[1:] or list(FITS)
    for name in names:
        base, _, deg = name.partition(":")
        c32, err = FITS[base](int(deg)) if deg else FITS[base]()
        show(name, c32, err)
