"""Error of binary32 results in ulps against a float64 (or mpmath) reference over random sweeps: the
one measure behind docs/NUMERICS.md's tables (benchmarks/repops_ulp_special.py) and the CI bounds
just above them (tests/repops/test_trig_special.py), so a bound and its figure measure the same thing."""
from __future__ import annotations

import mpmath as mp
import numpy as np


def ulps(y, ref):
    """Per-element |y - ref| in ulps of ref rounded to binary32, over normal results (subnormal
    results: 0, not counted); a special result (inf/NaN) that differs from ref's: inf."""
    ref32 = ref.astype(np.float32)
    with np.errstate(all="ignore"):
        err = np.abs(y.astype(np.float64) - ref) / np.spacing(np.abs(ref32)).astype(np.float64)
    special = ~np.isfinite(ref32) | ~np.isfinite(y)
    same = (np.isnan(ref32) & np.isnan(y)) | (ref32 == y)
    err = np.where(special, np.where(same, 0.0, np.inf), err)
    return np.where(~special & (np.abs(ref32) < 2.0 ** -126), 0.0, err)


def sweep(lo, hi, n, log=False, seed=0):
    """n binary32 inputs uniform in [lo, hi] (log-uniform where log); seed: an int or a
    numpy Generator (drawn from, so successive sweeps differ)."""
    rng = np.random.default_rng(seed)
    v = np.exp(rng.uniform(np.log(lo), np.log(hi), n)) if log else rng.uniform(lo, hi, n)
    return v.astype(np.float32)


def mp_reference(f, dps=25):
    """f (on mpmath numbers) as a float64 reference over an array, at dps digits."""
    def ref(x):
        with mp.workdps(dps):
            return np.array([float(f(mp.mpf(float(v)))) for v in x])
    return ref
