"""Max ulp error of the RepOps transcendentals over ALL 2^32 binary32 inputs.

  python benchmarks/repops_ulp.py [--only exp log tanh] [--chunk-bits 22] [--workers 2] [--kernels]

--kernels evaluates through the compiled CPU kernels (sin/cos's ~330 primitives take ~1 h a function
as numpy compositions, ~3 min as kernels) and checks them against the reference's bits on the
first 4,096 inputs of every chunk (4M inputs), failing on any difference.

Reference: the float64 function (numpy; torch for erf), whose error (~1e-16 relative) is
negligible at binary32 ulp scale. Error of a finite result = |y - ref| / ulp(ref), where
ulp is the binary32 spacing at |ref| rounded to binary32 (2^-149 in the subnormal range).
Special results must match exactly (inf/NaN/sign); a mismatch counts as an infinite error.
Writes benchmarks/results/repops_ulp.{json,png}: the table and max error per input binade.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
from tqdm import tqdm

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

FUNCS = ["exp", "log", "tanh", "sigmoid", "erf", "sin", "cos"]
GOALS = {"exp": 1.0, "log": 1.0, "tanh": 1.0}


def _reference(name, x64):
    import torch
    with np.errstate(all="ignore"):
        if name == "sigmoid":
            return 1.0 / (1.0 + np.exp(-x64))
        if name == "erf":
            return torch.special.erf(torch.from_numpy(x64)).numpy()
        return getattr(np, name)(x64)


def chunk_errors(args):
    """Max ulp error per input binade (256 exponent values x sign) for one chunk."""
    name, start, size, kernels = args
    from repops import cpu
    from repops.reference import math as M
    from repops.reference.prims import implementations
    u = np.arange(start, start + size, dtype=np.uint64).astype(np.uint32)
    x = u.view(np.float32)
    table = cpu.table()
    fast = {"fma": table["fma"]}  # bit-identical to the reference fma (tested), faster
    with implementations(fast):
        if kernels:
            spec = getattr(M, name)(x[:4096])
        with implementations({**fast, **({name: table[name]} if kernels else {})}):
            y = getattr(M, name)(x)
    if kernels and not (np.asarray(y[:4096]).view(np.uint32) == np.asarray(spec).view(np.uint32)).all():
        raise SystemExit(f"{name}: the CPU kernel's bits differ from the reference's at inputs from {start:#x}")
    y = np.asarray(y).astype(np.float64)
    ref = _reference(name, x.astype(np.float64))
    with np.errstate(all="ignore"):
        ref32 = ref.astype(np.float32)
        ulp = np.spacing(np.abs(ref32)).astype(np.float64)
        ulp = np.where(np.isinf(ref32), np.spacing(np.float32(3.4e38)), ulp)
        err = np.abs(y - ref) / ulp
    special = ~np.isfinite(ref32) | ~np.isfinite(y)
    same_special = (np.isnan(ref32) & np.isnan(y)) | (ref32 == y)
    err = np.where(special, np.where(same_special, 0.0, np.inf), err)
    # a finite ref beyond binary32 range that we round to inf is the correct answer
    err = np.where(np.isinf(y) & np.isfinite(ref) & (np.abs(ref) >= 3.4028235677973366e38) & (np.sign(y) == np.sign(ref)), 0.0, err)
    binade = (u >> 23).astype(np.int64)  # sign and exponent field
    out = np.zeros(512)
    np.maximum.at(out, binade, err)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", nargs="*", default=FUNCS)
    ap.add_argument("--chunk-bits", type=int, default=22)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "repops_ulp")
    ap.add_argument("--kernels", action="store_true", help="the compiled CPU kernels, checked against the reference")
    ap.add_argument("--table", action="store_true", help="redraw the PNG and print the table of saved results")
    args = ap.parse_args()
    size = 1 << args.chunk_bits
    path = args.out.with_suffix(".json")
    results = json.loads(path.read_text()) if path.exists() else {}
    if args.table:  # redraw and print from saved results, no computation
        _plot(results, args.out.with_suffix(".png"))
        print(table(results))
        return
    with ProcessPoolExecutor(args.workers) as pool:
        for name in args.only:
            t = time.time()
            per_binade = np.zeros(512)
            jobs = [(name, s, size, args.kernels) for s in range(0, 1 << 32, size)]
            for r in tqdm(pool.map(chunk_errors, jobs), total=len(jobs), desc=name):
                per_binade = np.maximum(per_binade, r)
            results[name] = {"max_ulp": float(per_binade.max()), "per_binade": per_binade.tolist(),
                             "inputs": 1 << 32, "seconds": round(time.time() - t, 1), "goal": GOALS.get(name),
                             "evaluated_by": "cpu kernels (reference bits checked)" if args.kernels else "reference"}
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(results))
            print(f"{name:8s} max error {per_binade.max():.3f} ulp over all 2^32 inputs "
                  f"(goal {GOALS.get(name, '-')}) in {time.time() - t:.0f} s", flush=True)
    _plot(results, args.out.with_suffix(".png"))
    print(table(results))


def table(results) -> str:
    """Markdown: max error over all inputs, and over |x| < 2^12 (sin/cos's accurate range)."""
    rows = ["| function | max ulp, all 2^32 inputs | max ulp, \\|x\\| < 2^12 | goal |", "|---|---:|---:|---:|"]
    for name in FUNCS:
        if name not in results:
            continue
        pb = np.array(results[name]["per_binade"])
        small = max(pb[:127 + 12].max(), pb[256:256 + 127 + 12].max())
        rows.append(f"| {name} | {results[name]['max_ulp']:.3g} | {small:.3f} | {GOALS.get(name, '-')} |")
    return "\n".join(rows)


def _plot(results, png):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(10, 4.5))
    e = np.arange(256) - 127
    for name, r in results.items():
        pb = np.array(r["per_binade"])
        ax.plot(e, np.maximum(pb[:256], pb[256:]), label=f"{name} (max {r['max_ulp']:.2f})")
    ax.axhline(1.0, color="r", ls="--", lw=1)
    ax.set_yscale("symlog", linthresh=1)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("input binade (unbiased exponent; both signs)")
    ax.set_ylabel("max error (ulp)")
    ax.set_title("RepOps transcendentals: max ulp error over all binary32 inputs")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png, dpi=120)


if __name__ == "__main__":
    main()
