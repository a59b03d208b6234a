"""An honest trainer's untraced steps replayed as one CUDA graph (offchain/trainer/graphs.py):
the claims, every step's loss and a fault claim are the eager GPU trainer's and the CPU's, and
the graph really ran (captured once, replayed, never given up). Before this passes on a GPU,
graphs stay off by default (VERDE_CUDA_GRAPHS).

The fault job is a program job, built with the pinned torch: on the lent GPU machines
(torch 2.11) scripts/gpu-wheels.sh builds it beforehand into VERDE_EXAMPLE_JOBS."""
import os
import sys
from pathlib import Path

import pytest

from kernel_samples import backend_table  # (tests/repops: see conftest.py)
from offchain.protocol.corpus import token_rows
from offchain.protocol.dataset import write_job
from offchain.protocol.jobfile import load
from offchain.trainer import Trainer

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "protocol"))
from small_job import write_fault_job, write_small_job  # noqa: E402

pytestmark = pytest.mark.gpu

LLAMA = {"vocab": 256, "d_model": 64, "n_layers": 2, "n_heads": 4, "d_ff": 128, "max_seq": 32}
JOBS = {  # 6 steps: traced where a claim is due, the others replayed (after a warm-up and the capture)
    "mlp": write_small_job,
    "llama": lambda d: write_job(d, "llama", LLAMA, {"tokens": token_rows(32, rows=64)}, steps=6, batch_size=4,
                                 fanout=3, chunk=128),
}


def _trainers(job, tmp_path):
    cpu = Trainer(job, tmp_path / "cpu", "cpu")
    eager = Trainer(job, tmp_path / "eager", "eager", device="cuda", graphs=False)
    graphed = Trainer(job, tmp_path / "graphed", "graphed", device="cuda", graphs=True)
    return cpu, eager, graphed


@pytest.mark.parametrize("name", sorted(JOBS))
def test_replayed_steps_commit_the_eager_and_the_cpu_claims(tmp_path, name):
    backend_table("cuda")  # skips without a device
    job = load(JOBS[name](tmp_path / "job"))
    cpu, eager, graphed = _trainers(job, tmp_path)
    want = cpu.train()
    assert eager.train() == want
    assert graphed.train() == want
    runner = graphed._graphs
    assert not runner.failed and runner.graph is not None and runner.graph.replays >= 2, vars(runner)
    assert graphed.claims == cpu.claims
    assert {s: float(v).hex() for s, v in graphed.losses.items()} == {s: float(v).hex() for s, v in cpu.losses.items()}


def test_a_fault_found_in_a_replay_is_the_cpu_fault_claim(tmp_path):
    backend_table("cuda")
    built = os.environ.get("VERDE_EXAMPLE_JOBS")
    job = load(Path(built) / "write_fault_job" / "job.yaml" if built else write_fault_job(tmp_path / "job"))
    cpu, _, graphed = _trainers(job, tmp_path)
    want = cpu.train()
    assert graphed.train() == want and graphed.fault_step == cpu.fault_step == 3
    assert graphed._graphs.graph is not None and graphed._graphs.graph.replays >= 2  # step 3 was a replay


if __name__ == "__main__":  # python tests/cuda/test_graphs_gpu.py DIR: the program job, built into DIR
    print(write_fault_job(Path(sys.argv[1]) / "write_fault_job"))
