"""How the trainer's protocol work grows with the model (issue #40): the job's Llama-style model
at several sizes, each measured in a fresh process (its peak memory is its own):

  python benchmarks/scale.py [--sizes 1m 4m 16m 40m 125m] [--device cpu|cuda] [--no-gas] [--plot]
  python benchmarks/scale.py --profile 40m   (where one traced step spends its time, and what it hashes)

Per size: a plain step and a traced step (every intermediate tensor committed), the state
commitment on every core and on one core against hashlib SHA-256 (one core) over the same bytes in the same run, a checkpoint written and
read, the peak resident memory of the process after its traced step (model, optimizer state and
the step's transients), the bytes a traced step hashes (its trace), a dispute with a cheater who
corrupts one attention element of the last step played off chain to level 5 (the trainer's seconds
per level, the referee's bytes received and seconds) and, unless --no-gas, the same dispute on
Anvil (the gas of every game transaction: it must stay flat in the model size). The JSON keeps
`cpu` and `gpu` rows side by side (a run of some sizes replaces only those rows); the PNG is
log-log cost vs parameters, one line per measure, with the fitted exponent of each in its legend.
Writes benchmarks/results/scale.{json,png}. Each size prints its phases as they end (stderr, with
the figures so far as `partial: {json}`): a run a GPU lease cuts short still says where its time went.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
OUT = ROOT / "benchmarks" / "results" / "scale"

# the job's model family (repops.models "llama": HF Llama's architecture) from ~1 M to ~125 M
# parameters on the CPU; 350 M and 1.1 B (hidden 2048, 16 layers, seq 1024) for a GPU machine
SIZES = {
    "1m": {"vocab": 256, "d_model": 128, "n_layers": 4, "n_heads": 4, "d_ff": 384, "max_seq": 64},
    "4m": {"vocab": 1024, "d_model": 256, "n_layers": 4, "n_heads": 4, "d_ff": 768, "max_seq": 64},
    "16m": {"vocab": 4096, "d_model": 384, "n_layers": 8, "n_heads": 6, "d_ff": 1152, "max_seq": 64},
    "40m": {"vocab": 8192, "d_model": 512, "n_layers": 10, "n_heads": 8, "d_ff": 1536, "max_seq": 64},
    "125m": {"vocab": 24576, "d_model": 768, "n_layers": 12, "n_heads": 12, "d_ff": 2048, "max_seq": 64},
    "350m": {"vocab": 32000, "d_model": 1024, "n_layers": 24, "n_heads": 16, "d_ff": 2816, "max_seq": 1024},
    "1.1b": {"vocab": 32000, "d_model": 2048, "n_layers": 16, "n_heads": 32, "d_ff": 5632, "max_seq": 1024},
}
CPU_SIZES = ["1m", "4m", "16m", "40m", "125m"]
GPU_SIZES = ["350m", "1.1b"]
LEVELS = {1: "root", 2: "node", 3: "kernel", 4: "element", 5: "primitive"}
STEPS, FANOUT, BATCH = 2, 2, 2
MEASURES = {"step_s": "plain step (s)", "traced_step_s": "traced step (s)", "commit_s": "state commitment (s)",
            "checkpoint_write_s": "checkpoint write (s)", "peak_mem_bytes": "peak memory (bytes)",
            "trace_bytes": "trace (bytes)", "answer_total_s": "trainer's dispute answers (s)",
            "referee_bytes": "referee bytes", "gas": "gas (whole dispute)"}


def _timed(f):
    t = time.perf_counter()
    out = f()
    return time.perf_counter() - t, out


def _job(size: str, tmp: Path):
    """The job of one size: the model family at SIZES[size], its token corpus, in tmp."""
    from offchain.protocol.corpus import token_rows
    from offchain.protocol.dataset import write_job
    from offchain.protocol.jobfile import load
    config = SIZES[size]
    return load(write_job(tmp / "job", "llama", config, {"tokens": token_rows(config["max_seq"])}, steps=STEPS,
                          batch_size=BATCH, fanout=FANOUT))


def measure(size: str, device: str, gas: bool) -> dict:
    """One size, in this process (run through `--one`)."""
    import torch

    from offchain.dispute.context import Context
    from offchain.dispute.party import InProcess, Party
    from offchain.dispute.referee import dispute
    from offchain.protocol import chunktree
    from offchain.protocol.tensors import commit_many
    from offchain.protocol.trace import decode_structure
    from offchain.trainer import Trainer
    from offchain.trainer import adversaries as A
    from offchain.trainer.store import CheckpointStore

    start, partial = time.perf_counter(), {"size": size}

    def phase(what: str, **figures):
        """One line per phase on stderr, and the figures so far: a run cut short (a lease's
        limit, a full disk) still says where its time went."""
        partial.update(figures)
        print(f"[scale {size} {device} +{time.perf_counter() - start:.1f}s] {what}", file=sys.stderr, flush=True)
        print("partial: " + json.dumps(partial), file=sys.stderr, flush=True)

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        job = _job(size, tmp)
        honest = Trainer(job, tmp / "h", "honest", device=device)
        st = honest._fresh_state()
        params = sum(p.numel() for p in st.model.parameters())
        phase("initial state", params=params)
        sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
        honest._run(st, 0)  # warm-up (allocations, kernel builds)
        sync()
        phase("warm-up step")
        step_s, _ = _timed(lambda: (honest._run(st, 1), sync()))
        phase("plain step", step_s=step_s)
        traced_s, (rec, _) = _timed(lambda: (honest._traced(st, 1), sync()))
        phase("traced step", traced_step_s=traced_s, trace_bytes=rec.hashed, trace_tensors=rec.tensors_hashed)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        gpu_peak = torch.cuda.max_memory_allocated() if device == "cuda" else None
        tensors = st.tensors()
        nbytes = sum(t.numel() * t.element_size() for t in tensors)
        commit_s, _ = _timed(lambda: commit_many(tensors, job.spec.chunk))  # (every core: a trainer's)
        threads = chunktree.threads()
        # per core on the host, the bar's terms: hashlib's SHA-256 is one core, over the same host
        # bytes (on a GPU machine commit_s is the device's tree; these two time no download)
        host = [t.detach().cpu().contiguous().numpy() for t in tensors]
        os.environ.update(VERDE_COMMIT_THREADS="1", VERDE_COMMIT_ON_DEVICE="0")
        try:
            commit_1_s, _ = _timed(lambda: commit_many([torch.from_numpy(a) for a in host], job.spec.chunk))
        finally:
            os.environ.pop("VERDE_COMMIT_THREADS")
            os.environ.pop("VERDE_COMMIT_ON_DEVICE")
        sha_s, _ = _timed(lambda: [hashlib.sha256(a).digest() for a in host])
        phase("state commitment", commit_s=commit_s, commit_1_s=commit_1_s, sha_s=sha_s)
        store = CheckpointStore(tmp / "ckpt")
        write_s, _ = _timed(lambda: store.save(1, st.state_dict()))
        read_s, _ = _timed(lambda: store.load(1))
        shutil.rmtree(store.dir)  # (16 bytes a parameter: at 1.1b, disk the trainers' checkpoints need)
        phase("checkpoint written and read", checkpoint_write_s=write_s, checkpoint_read_s=read_s)
        del st, host

        # the dispute: a cheater corrupts one element of the last step's first attention output
        ctx = Context(job)
        node = [decode_structure(x)[0] for x in ctx.graph.structures].index("repops.attention.default")
        cheater = Trainer(job, tmp / "b", "cheater", device=device,
                          behaviour=A.CorruptValue(step=STEPS - 1, node=node, element=3, ulps=64))
        honest.train()
        phase("honest run (its checkpoints and claims)")
        cheater.train()
        phase("cheater's run")
        seconds: dict[int, float] = {}

        class Timed(Party):
            def ask(self, level, method, *args):
                t = time.perf_counter()
                try:
                    return super().ask(level, method, *args)
                finally:
                    if self.name == "honest":
                        seconds[level] = seconds.get(level, 0.0) + time.perf_counter() - t

        v = dispute(ctx, Timed("honest", InProcess(honest), deadline_s=3600, final=honest.final_claim()),
                    Timed("cheater", InProcess(cheater), deadline_s=3600, final=cheater.final_claim()))
        phase(f"dispute played to level {v.level}", answer_s={LEVELS[k]: t for k, t in sorted(seconds.items())})
        if v.winner != "honest":
            raise SystemExit(f"{size}: the honest trainer did not win: {v}")
        row = {"size": size, "measured": time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime()), "config": SIZES[size], "params": params, "state_bytes": nbytes,
               "step_s": step_s, "traced_step_s": traced_s, "traced_ratio": traced_s / step_s,
               "commit_s": commit_s, "commit_gbps": nbytes / commit_s / 1e9, "sha256_gbps": nbytes / sha_s / 1e9,
               "commit_threads": threads, "commit_one_core_gbps": nbytes / commit_1_s / 1e9,
               "commit_vs_sha256": sha_s / commit_1_s, "checkpoint_write_s": write_s, "checkpoint_read_s": read_s,
               "peak_mem_bytes": peak, "gpu_peak_mem_bytes": gpu_peak, "trace_bytes": rec.hashed, "trace_tensors": rec.tensors_hashed,
               "answer_s": {LEVELS[k]: s for k, s in sorted(seconds.items())},
               "answer_total_s": sum(seconds.values()), "level": v.level,
               "referee_bytes": v.bytes_received, "referee_s": v.seconds, "gas": None, "max_tx_gas": None}
        if gas:
            row["gas"], row["max_tx_gas"] = _chain_gas(job, ctx, honest, cheater)
        return row


def _chain_gas(job, ctx, honest, cheater) -> tuple[int, int]:
    """The same dispute on Anvil: the gas of every transaction from the match's opening on."""
    from offchain.chain.backends import anvil
    from offchain.chain.verde import Verde
    with anvil() as chain:
        v = Verde.deploy(chain)
        client, ha, ba = chain.accounts[1], chain.accounts[2], chain.accounts[3]
        seats = [(ha, honest), (ba, cheater)]
        jid, _ = v.deliver(job, ctx, seats, 3 * 10**18, 10**18, client)
        first = chain.w3.eth.block_number + 1
        m = v.open_match(jid, ha.address, ba.address)
        v.play(m, seats, ctx, max_rounds=200)
        decided = v.decision(m)
        if not decided or decided.get("winner", ha.address) != ha.address:
            raise SystemExit(f"on chain the honest trainer did not win: {decided}")
        w3, used = chain.w3, []
        for n in range(first, w3.eth.block_number + 1):
            for tx in w3.eth.get_block(n)["transactions"]:
                used.append(w3.eth.get_transaction_receipt(tx)["gasUsed"])
        return sum(used), max(used)


def fit(xs, ys) -> float:
    """The least-squares slope of log y on log x: cost ~ params^slope."""
    lx, ly = [math.log(x) for x in xs], [math.log(y) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    den = sum((a - mx) ** 2 for a in lx)
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly)) / den if den else float("nan")


def plot(rows: list, path: Path, title: str) -> dict:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(8, 5.5))
    exponents = {}
    for key, label in MEASURES.items():
        pts = [(r["params"], r[key]) for r in rows if r.get(key)]
        if len(pts) < 2:
            continue
        xs, ys = zip(*pts)
        exponents[key] = fit(xs, ys)
        ax.plot(xs, ys, "o-", label=f"{label}: ~N^{exponents[key]:.2f}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("parameters N")
    ax.set_ylabel("cost (its own unit)")
    ax.set_title(title)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return exponents


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", nargs="*", default=None, choices=sorted(SIZES))
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--no-gas", action="store_true", help="skip the on-chain dispute (Anvil)")
    ap.add_argument("--one", default=None, help=argparse.SUPPRESS)  # a child: one size, JSON on stdout
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--plot", action="store_true", help="no measuring: refit and redraw from the JSON")
    ap.add_argument("--profile", default=None, choices=sorted(SIZES),
                    help="no measuring: where one traced step of this size spends its time (cProfile)")
    args = ap.parse_args()
    if args.profile:
        return profile(args.profile, args.device)
    if args.one:
        print(json.dumps(measure(args.one, args.device, not args.no_gas)))
        return
    from rich.console import Console
    from rich.table import Table
    from tqdm import tqdm
    con = Console(width=220)
    sizes = args.sizes or (CPU_SIZES if args.device == "cpu" else GPU_SIZES)
    key = "cpu" if args.device == "cpu" else "gpu"
    path = args.out.with_suffix(".json")
    data = json.loads(path.read_text()) if args.plot else None
    for size in ([] if args.plot else tqdm(sizes, desc="sizes")):
        cmd = [sys.executable, __file__, "--one", size, "--device", args.device] + (["--no-gas"] if args.no_gas else [])
        p = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)  # (its phases on stderr, as they end)
        if p.returncode != 0:
            raise SystemExit(f"size {size} failed (exit {p.returncode}): its phases and figures so far are above; "
                             f"the sizes before it are in {path}")
        data = save(path, key, json.loads(p.stdout.strip().splitlines()[-1]))  # (after each size: a long run keeps them)
    t = Table("params", "step s", "traced s", "ratio", "commit GB/s", "vs sha256", "ckpt w/r s", "peak MB",
              "trace MB", *[f"{n} s" for n in LEVELS.values()], "referee B", "gas", title=f"scale ({args.device})")
    for r in data[key]:
        t.add_row(f"{r['params']:,}", f"{r['step_s']:.2f}", f"{r['traced_step_s']:.2f}", f"{r['traced_ratio']:.2f}",
                  f"{r['commit_gbps']:.2f}", f"{r['commit_vs_sha256']:.2f}",
                  f"{r['checkpoint_write_s']:.2f}/{r['checkpoint_read_s']:.2f}", f"{r['peak_mem_bytes'] / 2**20:,.0f}",
                  f"{r['trace_bytes'] / 2**20:,.0f}", *[f"{r['answer_s'].get(n, 0):.2f}" for n in LEVELS.values()],
                  f"{r['referee_bytes']:,}", "-" if r["gas"] is None else f"{r['gas']:,}")
    con.print(t)
    data["exponents"] = plot(data["cpu"] + data["gpu"], args.out.with_suffix(".png"), "Verde's protocol costs vs "
                             f"model size ({len(data['cpu'])} CPU, {len(data['gpu'])} GPU sizes)")
    path.write_text(json.dumps(data, indent=1))
    con.print("fitted exponents (cost ~ params^e): " + ", ".join(f"{k} {e:.2f}" for k, e in data["exponents"].items()))
    con.print(f"wrote {path} and .png")


def profile(size: str, device: str, top: int = 12) -> None:
    """One traced step (the second: caches warm) under cProfile, its top functions by own time:
    what a traced step pays besides the step (chunk hashing, copies of strided outputs, ...)."""
    import cProfile
    import pstats

    from offchain.trainer import Trainer
    with tempfile.TemporaryDirectory() as tmp:
        t = Trainer(_job(size, Path(tmp)), Path(tmp) / "t", "t", device=device)
        t.step_trace(0)
        t._trace_cache = None  # (traced again, not answered from the cache)
        pr = cProfile.Profile()
        start = time.perf_counter()
        pr.runcall(t.step_trace, 0)
        print(f"traced step of {size}: {time.perf_counter() - start:.2f} s")
        pstats.Stats(pr).sort_stats("tottime").print_stats(top)
        rec = t._traced(t._fresh_state(), 0)
        print(f"bytes it hashes, {rec.hashed / 2**20:,.0f} MiB, by producer:")
        for by, n in sorted(rec.hashed_by.items(), key=lambda kv: -kv[1])[:top]:
            print(f"  {n / rec.hashed:6.1%} {n / 2**20:10,.1f} MiB  {by}")


def save(path: Path, key: str, row: dict) -> dict:
    """row merged into the JSON's `key` list by size (a run of some sizes keeps the others)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = json.loads(path.read_text()) if path.exists() else {"cpu": [], "gpu": []}
    kept = {r["size"]: r for r in data.get(key, [])} | {row["size"]: row}
    data[key] = sorted(kept.values(), key=lambda r: r["params"])
    data["command"] = "python benchmarks/scale.py" + ("" if key == "cpu" else " --device cuda")
    data["steps"], data["fanout"], data["batch_size"] = STEPS, FANOUT, BATCH
    data.pop("note", None)  # (a note on an earlier run's conditions: each row says when it was measured)
    path.write_text(json.dumps(data, indent=1))
    return data


if __name__ == "__main__":
    main()
