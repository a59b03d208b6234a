"""What level 3 costs to decompose a wide node (issue #40): a log_softmax backward over rows of
n classes, one kernel per class in the spec's fold, with level 3's source search as it is (each
operand looked up among the sources over its own memory, unreachable sources given back) and as
it was for a tensor's borrowed memory (every source kept, and scanned for each operand); and the bytes of sources a matmul keeps alive, given back
when nothing reaches them or all kept. Each kernel structure is the same either way
(tests/protocol/test_oprun_sources.py); only time and memory differ.

  python benchmarks/level3_sources.py [--widths 1000 2000 4000 8000] [--scan-upto 4000] [--answers 128 256 512]

and what a level-3 answer for a matmul costs with its fma steps computed by numpy's binary64
emulation (the reference) and by the CPU backend's compiled kernels, each step's accumulator
hashed once (the same kernels: leaves asserted equal).

Prints a table; writes benchmarks/results/level3_sources.{json,png}."""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
OUT = ROOT / "benchmarks" / "results" / "level3_sources"


def _node(fn, *inputs):
    """The last node of a traced run of fn, and its inputs (state tensors here)."""
    import repops
    from offchain.protocol.trace import StepRecorder
    rec = StepRecorder(list(inputs), [], chunk=1024)
    with repops.deterministic(trace=rec):
        fn(*inputs)
    node = rec.nodes[-1]
    return node, [inputs[r.index] for r in node.refs]


def decompose_s(n: int, scan: bool) -> tuple[float, int]:
    """(seconds, kernels) to decompose a 4 x n log_softmax backward."""
    from offchain.dispute import oprun as O
    y = torch.log_softmax(torch.randn(4, n, generator=torch.Generator().manual_seed(n)), -1)
    node, ins = _node(lambda g, y: torch.ops.aten._log_softmax_backward_data(g, y, -1, torch.float32),
                      torch.ones_like(y), y)
    find, sweep = O._Sources._find, O._Sources.sweep
    if scan:  # as before: every source kept, and every one scanned for each operand
        O._Sources._find = lambda self, a: None if a.size == 0 else self.scan(a, *self.span(a))
        O._Sources.sweep = lambda self: None
    try:
        t = time.perf_counter()
        kernels = O.OpRun(node.structure(), ins, 1024).kernels(commit_all=False)
        return time.perf_counter() - t, len(kernels)
    finally:
        O._Sources._find, O._Sources.sweep = find, sweep


def matmul_kept_bytes(k: int, sweep: bool) -> int:
    """The most bytes of sources alive while a [64, k] @ [k, 64] matmul is decomposed."""
    from offchain.dispute import oprun as O
    g = torch.Generator().manual_seed(k)
    node, ins = _node(lambda a, b: a @ b, torch.randn(64, k, generator=g), torch.randn(k, 64, generator=g))
    add, swept, most = O._Sources.add, O._Sources.sweep, [0]

    def counted(self, a):
        add(self, a)
        most[0] = max(most[0], sum(x.nbytes for x in self.arrays if x.flags.owndata))
    O._Sources.add = counted
    if not sweep:
        O._Sources.sweep = lambda self: None
    try:
        O.OpRun(node.structure(), ins, 1024).kernels(commit_all=False)
    finally:
        O._Sources.add, O._Sources.sweep = add, swept
    return most[0]


def matmul_answer_s(n: int) -> dict:
    """Seconds to decompose and commit (a level-3 answer) an [n, n] @ [n, 2n] matmul, its n fma
    steps computed by the numpy reference (binary64 emulation) and by the CPU backend's compiled
    map kernels (offchain/dispute/oprun.py _map_kernels); the kernels' leaves must be equal."""
    import os

    from offchain.dispute import oprun as O
    g = torch.Generator().manual_seed(n)
    node, ins = _node(lambda a, b: a @ b, torch.randn(n, n, generator=g), torch.randn(n, 2 * n, generator=g))
    out, leaves = {"n": n}, {}
    for key, flag in (("reference_s", "0"), ("compiled_s", "1")):
        os.environ["VERDE_LEVEL3_KERNELS"] = flag
        try:
            t = time.perf_counter()
            leaves[key] = [k.leaf() for k in O.OpRun(node.structure(), ins, 256).kernels()]
            out[key] = round(time.perf_counter() - t, 3)
        finally:
            os.environ.pop("VERDE_LEVEL3_KERNELS")
    if leaves["reference_s"] != leaves["compiled_s"]:
        raise SystemExit(f"n = {n}: the compiled map kernels changed a level-3 kernel")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--widths", nargs="*", type=int, default=[1000, 2000, 4000, 8000])
    ap.add_argument("--scan-upto", type=int, default=4000, help="widths the full scan is timed at (it is quadratic)")
    ap.add_argument("--depths", nargs="*", type=int, default=[256, 1024, 4096])
    ap.add_argument("--answers", nargs="*", type=int, default=[128, 256, 512], help="matmul sizes n of the answer timing")
    args = ap.parse_args()
    from rich.console import Console
    from rich.table import Table
    from tqdm import tqdm
    rows = []
    for n in tqdm(args.widths, desc="widths"):
        keyed, kernels = decompose_s(n, scan=False)
        scanned = decompose_s(n, scan=True)[0] if n <= args.scan_upto else None
        rows.append({"width": n, "kernels": kernels, "keyed_s": round(keyed, 3),
                     "before_s": None if scanned is None else round(scanned, 3)})
    depth = [{"k": k, "swept_bytes": matmul_kept_bytes(k, True), "kept_bytes": matmul_kept_bytes(k, False)}
             for k in tqdm(args.depths, desc="matmul depths")]
    answers = [matmul_answer_s(n) for n in tqdm(args.answers, desc="matmul answers")]
    t = Table(title="level 3: decomposing a wide node")
    for c in ("width", "kernels", "keyed s", "before: scan of all, s"):
        t.add_column(c, justify="right")
    for r in rows:
        t.add_row(f"{r['width']:,}", f"{r['kernels']:,}", f"{r['keyed_s']:.3f}",
                  "-" if r["before_s"] is None else f"{r['before_s']:.3f}")
    m = Table(title="level 3: a \[64, k] @ \[k, 64] matmul's sources alive at most")
    for c in ("k", "given back (bytes)", "all kept (bytes)"):
        m.add_column(c, justify="right")
    for r in depth:
        m.add_row(f"{r['k']:,}", f"{r['swept_bytes']:,}", f"{r['kept_bytes']:,}")
    c = Table(title="level 3: answering for an \\[n, n] @ \\[n, 2n] matmul (n fma kernels, each committed)")
    for col in ("n", "numpy reference s", "compiled kernels, accumulator hashed once, s", "speed-up"):
        c.add_column(col, justify="right")
    for r in answers:
        c.add_row(f"{r['n']:,}", f"{r['reference_s']:.2f}", f"{r['compiled_s']:.2f}",
                  f"{r['reference_s'] / r['compiled_s']:.1f}x")
    Console().print(t, m, c)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.with_suffix(".json").write_text(json.dumps({"command": "python benchmarks/level3_sources.py",
                                                    "fold": rows, "matmul": depth, "matmul_answer": answers},
                                                   indent=1) + "\n")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    sc = [r for r in rows if r["before_s"] is not None]
    panels = [  # (title, x label, y label, [(label, rows, x key, y key)])
        ("log_softmax backward, 4 x n", "row width n (kernels)", "seconds",
         [("keyed search", rows, "width", "keyed_s"), ("before: every source kept and scanned", sc, "width", "before_s")]),
        ("matmul [64, k] @ [k, 64]", "k (kernels)", "bytes of sources alive",
         [("unreachable given back", depth, "k", "swept_bytes"), ("every source kept", depth, "k", "kept_bytes")]),
        ("level-3 answer: [n, n] @ [n, 2n]", "n", "seconds",
         [("numpy reference prims", answers, "n", "reference_s"),
          ("compiled map kernels, accumulator hashed once", answers, "n", "compiled_s")])]
    for ax, (title, xlabel, ylabel, lines) in zip(axes, panels):
        for (label, rs, x, y), marker in zip(lines, ("o-", "s-")):
            ax.loglog([r[x] for r in rs], [r[y] for r in rs], marker, label=label)
        ax.set(xlabel=xlabel, ylabel=ylabel, title=title)
        ax.legend()
    fig.tight_layout()
    fig.savefig(OUT.with_suffix(".png"), dpi=110)
    print(f"wrote {OUT.with_suffix('.json')} and .png")


if __name__ == "__main__":
    main()
