"""How close binary32 gets to a multiple of pi/2: the precision sin/cos's reduction needs.

  python benchmarks/sincos_worst_cases.py        (~10 s)

For every binade 1 <= |x| < 2^128 (x = M 2^E, M in [2^23, 2^24)), M (2^E 2/pi) mod 1 in 64-bit
fixed point (numpy's wrapping uint64 products; the error, M 2^-64 < 2^-40, is far below what is
found) gives min |x - n pi/2| per binade. repops/reference/math.py's Payne-Hanek reduction keeps
f = x 2/pi - n to ~2^-47 of itself, enough where |r| is 2^-29.2 (1 ulp needs ~2^-55 absolute);
tests/repops/test_trig_special.py checks sin and cos at the closest ones against mpmath.
Prints the closest approaches and writes benchmarks/results/sincos_worst_cases.json.
"""
from __future__ import annotations

import json
from pathlib import Path

import mpmath
import numpy as np
from tqdm import tqdm

OUT = Path(__file__).resolve().parent / "results" / "sincos_worst_cases.json"


def closest_per_binade():
    mpmath.mp.prec = 600
    two_over_pi = mpmath.mpf(2) / mpmath.pi
    m = np.arange(2 ** 23, 2 ** 24, dtype=np.uint64)
    rows = []
    for e in tqdm(range(-23, 105), desc="binade"):
        beta = mpmath.ldexp(two_over_pi, e)
        frac = np.uint64(int(mpmath.floor(mpmath.ldexp(beta - mpmath.floor(beta), 64))))
        v = m * frac                                   # M frac mod 2^64
        d = np.minimum(v, np.uint64(0) - v)            # distance to the nearest integer, times 2^64
        i = int(np.argmin(d))
        r = float(d[i]) / 2 ** 64 * float(mpmath.pi / 2)
        rows.append({"x": float(m[i]) * 2.0 ** e, "M": int(m[i]), "E": e, "r": r, "log2_r": float(np.log2(r))})
    return sorted(rows, key=lambda row: row["r"])


def main():
    rows = closest_per_binade()
    print("| x | M 2^E | |x - n pi/2| | log2 |")
    print("|---:|---|---:|---:|")
    for row in rows[:10]:
        print(f"| {row['x']:.9g} | {row['M']} 2^{row['E']} | {row['r']:.3g} | {row['log2_r']:.2f} |")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(rows, indent=1) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
