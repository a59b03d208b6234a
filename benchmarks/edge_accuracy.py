"""The accuracy figures behind the 2026-11-28 edge fixes, one command (~40 s):

  python benchmarks/edge_accuracy.py

- pow: max ulp over 60k pairs whose results span every normal binade (the test's sweep): RepOps'
  two-float y log|x|, the one-float exp(y log|x|) it replaced, and torch float32;
- j0 / y1 for x log-uniform in [6400, 1e30]: max error in units of the envelope sqrt(2/(pi x)),
  RepOps and torch float32, against mpmath;
- add with alpha: the share of elements whose bits equal torch's, for fma(b, alpha, a) (RepOps)
  and for the rounded product then the add (before);
- var of 448 values at 1000, 0-2 ulps apart: RepOps, the uncorrected two-pass, torch, float64;
- linear upsampling: the share of torch eager's bits RepOps (torch._decomp's v0 + (v1 - v0) w)
  and the eager formula fma(w0, v0, w1 v1) (numpy) give.
Prints a table and writes benchmarks/results/edge_accuracy.json.
"""
from __future__ import annotations

import json
from pathlib import Path

import mpmath
import numpy as np
import torch
import torch.nn.functional as F

import repops
from repops.reference import activations as A
from repops.reference import bessel as B
from repops.reference import math as M
from repops.reference import prims as P
from repops.reference import resample as R

OUT = Path(__file__).resolve().parent / "results" / "edge_accuracy.json"
F32 = np.float32


def _ulps(got, want):
    ulp = np.spacing(np.abs(want.astype(F32))).astype(np.float64)
    return np.abs(np.asarray(got, np.float64) - want) / ulp


def pow_errors():
    rng = np.random.default_rng(5)
    x = F32(10.0) ** rng.uniform(-30, 30, 60000).astype(F32)
    y = (rng.uniform(-87, 88, 60000) / np.log(x.astype(np.float64))).astype(F32)
    want = np.power(x.astype(np.float64), y.astype(np.float64))
    ok = (np.abs(want) >= 2.0 ** -126) & (np.abs(want) < 3.4e38)
    one_float = M.exp(P.mul(y, M.log(x)))
    native = torch.pow(torch.from_numpy(x), torch.from_numpy(y)).numpy()
    return {name: float(_ulps(v, want)[ok].max()) for name, v in
            (("repops", A.pow(x, y)), ("one_float_before", one_float), ("torch", native))}


def bessel_envelope():
    x = np.exp(np.random.default_rng(1).uniform(np.log(6400), np.log(1e30), 300)).astype(F32)
    env = np.sqrt(2 / (np.pi * x.astype(np.float64)))
    out = {}
    for name, mine, ref, native in (("j0", B.j0, lambda v: mpmath.besselj(0, v), torch.special.bessel_j0),
                                    ("y1", B.y1, lambda v: mpmath.bessely(1, v), torch.special.bessel_y1)):
        truth = np.array([float(ref(mpmath.mpf(float(v)))) for v in x])
        nat = native(torch.from_numpy(x)).double().numpy()
        out[name] = {"repops": float((np.abs(mine(x) - truth) / env).max()),
                     "torch": float((np.abs(nat - truth) / env).max())}
    return out


def add_alpha_agreement():
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(100000, generator=g), torch.randn(100000, generator=g)
    out = {}
    for alpha in (0.3, -1.7, 2.0):
        t = torch.add(a, b, alpha=alpha).numpy().view(np.uint32)
        fused = P.fma(b.numpy(), F32(alpha), a.numpy()).view(np.uint32)
        rounded = (a.numpy() + b.numpy() * F32(alpha)).view(np.uint32)
        out[str(alpha)] = {"fma": float((fused == t).mean()), "mul_then_add": float((rounded == t).mean())}
    return out


def var_tight():
    g = torch.Generator().manual_seed(4)
    x = 1000.0 + torch.randint(0, 3, (7, 64), generator=g).float() * 6.103515625e-05
    with repops.deterministic():
        mine = float(x.var())
    xs = x.numpy().reshape(-1)
    d = P.sub(xs, F32(xs.sum(dtype=F32) / F32(xs.size)))
    before = float(P.mul(d, d).sum(dtype=F32) / F32(xs.size - 1))
    return {"repops": mine, "uncorrected_two_pass": before, "torch": float(x.var()), "float64": float(x.double().var())}


def _lerp_fma(v0, v1, w1):
    w1 = np.broadcast_to(w1, v0.shape).astype(F32)
    return P.fma(F32(1.0) - w1, v0, w1 * v1)


def _corners(n, m, align, scale=2.3):
    """(index 0, index 1, w1) along an axis, as RepOps' tables for F.interpolate(scale_factor=2.3)."""
    tab = R.linear_table(n, m, align, scale)
    return (np.array([p[1] for p in tab[0]]), np.array([p[1] for p in tab[1]]),
            np.asarray(R.linear_lambda(n, m, align, scale)).astype(F32))


def upsample_agreement():
    g = torch.Generator().manual_seed(0)
    out = {}
    for align in (False, True):
        x = torch.randn(2, 3, 17, generator=g)
        eager = F.interpolate(x, scale_factor=2.3, mode="linear", align_corners=align)
        with repops.deterministic():
            mine = F.interpolate(x, scale_factor=2.3, mode="linear", align_corners=align)
        i0, i1, w = _corners(17, eager.shape[-1], align)
        fused = _lerp_fma(x.numpy()[..., i0], x.numpy()[..., i1], w)
        e = eager.numpy().view(np.uint32)
        out[f"linear align={align}"] = {"repops": float((mine.numpy().view(np.uint32) == e).mean()),
                                        "fma_form": float((fused.view(np.uint32) == e).mean())}
        x = torch.randn(2, 3, 9, 11, generator=g)
        eager = F.interpolate(x, scale_factor=2.3, mode="bilinear", align_corners=align)
        with repops.deterministic():
            mine = F.interpolate(x, scale_factor=2.3, mode="bilinear", align_corners=align)
        a0, a1, wh = _corners(9, eager.shape[-2], align)
        b0, b1, ww = _corners(11, eager.shape[-1], align)
        xv = x.numpy()
        rows = [_lerp_fma(xv[..., r, :][..., b0], xv[..., r, :][..., b1], ww) for r in (a0, a1)]
        fused = _lerp_fma(rows[0], rows[1], wh[:, None])
        e = eager.numpy().view(np.uint32)
        out[f"bilinear align={align}"] = {"repops": float((mine.numpy().view(np.uint32) == e).mean()),
                                          "fma_form": float((fused.view(np.uint32) == e).mean())}
    return out


def main():
    torch.set_num_threads(1)
    res = {"pow_max_ulp": pow_errors(), "bessel_envelope": bessel_envelope(),
           "add_alpha_bits_equal_torch": add_alpha_agreement(), "var_tight": var_tight(),
           "upsample_bits_equal_eager": upsample_agreement()}
    for name, v in res.items():
        print(f"{name}: {json.dumps(v)}")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(res, indent=1) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
