"""Gas per binary32 primitive of Float32.sol, measured on Anvil through Float32Harness.

  python benchmarks/softfloat_gas.py [--vectors 4000] [--chain anvil]

Each evaluation's gas is taken with gasleft() around one call through the primitive
table; `copy` (which does nothing) measures that call's own overhead, and the `net`
columns subtract it. Vectors: the edge set's combinations and random bit patterns, as in
the tests. Writes benchmarks/results/softfloat_gas.{json,png}.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from offchain.softfloat import float32 as sf  # noqa: E402
from offchain.softfloat import check as chk  # noqa: E402
from offchain.chain import connect  # noqa: E402

GOALS = {"add": 700, "sub": 700, "mul": 700, "div": 1200, "sqrt": 1200, "fma": 1200}  # issue #21's bars


def measure(chain, n: int, seed: int) -> dict:
    h = chain.deploy("Float32Harness")
    rng = np.random.default_rng(seed)
    out = {}
    for name, (code, _, _) in sorted(sf.PRIMITIVES.items(), key=lambda kv: kv[1][0]):
        a, b, c = chk.sample(name, n, rng)
        gas, res = [], []
        for i in range(0, len(a), 2000):
            r, g = chain.call(h.functions.run(code, a[i:i + 2000].tolist(), b[i:i + 2000].tolist(), c[i:i + 2000].tolist()))
            gas += g
            res += r
        # "finite": operands and result finite, i.e. the arithmetic path, not an early exit
        finite = [g for g, *w in zip(gas, a.tolist(), b.tolist(), c.tolist(), res)
                  if all((v & 0x7F800000) != 0x7F800000 for v in _float_words(name, w))]
        out[name] = {"opcode": code, "vectors": len(gas), "median": statistics.median(gas), "max": max(gas),
                     "mean": statistics.fmean(gas), "finite_vectors": len(finite),
                     "median_finite": statistics.median(finite) if finite else None}
    base = out["copy"]["median"]
    for r in out.values():
        r["net_median"], r["net_max"] = r["median"] - base, r["max"] - base
        r["net_median_finite"] = None if r["median_finite"] is None else r["median_finite"] - base
    return out


def _float_words(name, words):
    """The operand and result words that are binary32 (not int32, not booleans)."""
    _, arity, _ = sf.PRIMITIVES[name]
    a_b_c, result = words[:arity], words[3]
    floats = [w for i, w in enumerate(a_b_c) if (name, i) not in sf.INT32_OPERANDS and not (name == "select" and i == 0)]
    return floats + ([] if name in ("eq", "lt", "le", "to_int32_trunc", "to_int32_rne") else [result])


def plot(res: dict, path: Path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    names = [n for n in res if n != "copy"]
    fig, ax = plt.subplots(figsize=(11, 4.5))
    x = np.arange(len(names))
    ax.bar(x - 0.2, [res[n]["net_median_finite"] or 0 for n in names], 0.4,
           label="median, finite operands and result (net of call overhead)")
    ax.bar(x + 0.2, [res[n]["net_max"] for n in names], 0.4, label="max (net)")
    for i, n in enumerate(names):
        if n in GOALS:
            ax.plot([i - 0.4, i + 0.4], [GOALS[n]] * 2, "r--", lw=1)
    ax.set_xticks(x, names, rotation=45, ha="right")
    ax.set_ylabel("gas")
    ax.set_title("Float32.sol gas per primitive (red dashes: goals)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vectors", type=int, default=4000)
    ap.add_argument("--chain", default="anvil")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "softfloat_gas")
    args = ap.parse_args()
    with connect(args.chain) as chain:
        res = measure(chain, args.vectors, args.seed)
    t = Table("primitive", "vectors", "net median", "net median (finite)", "net max", "goal")
    for n, r in res.items():
        goal, fin = GOALS.get(n), r["net_median_finite"]
        ok = "" if goal is None or fin is None else ("[green]" if fin <= goal else "[red]") + f"<= {goal}"
        t.add_row(n, str(r["vectors"]), f"{r['net_median']:,.0f}", "-" if fin is None else f"{fin:,.0f}",
                  f"{r['net_max']:,.0f}", ok)
    Console().print(t)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps({"chain": args.chain, "results": res}, indent=1))
    plot(res, args.out.with_suffix(".png"))
    print(f"wrote {args.out.with_suffix('.json')} and .png")


if __name__ == "__main__":
    main()
