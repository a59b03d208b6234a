"""A job with micro-batches trained on the GPU commits the CPU's root (issue #19: the GPU
side of 'the same bits for any world size'; N = 1 on one GPU, NCCL needs a GPU per rank)."""
import sys
from pathlib import Path

import pytest

from kernel_samples import backend_table  # (tests/repops: see conftest.py)
from offchain.protocol.dataset import write_job
from offchain.protocol.jobfile import load
from offchain.trainer import Trainer

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "protocol"))
from small_job import mlp_data  # noqa: E402


@pytest.mark.gpu
def test_a_micro_batched_job_on_the_gpu_commits_the_cpu_root(tmp_path):
    backend_table("cuda")  # skips without a device
    job = load(write_job(tmp_path / "job", "mlp", {"d_in": 16, "d_hidden": 32, "n_classes": 10}, mlp_data(), steps=5,
                         batch_size=8, fanout=2, chunk=64, micro_batches=4))
    cpu = Trainer(job, tmp_path / "cpu", "cpu").train()
    assert Trainer(job, tmp_path / "gpu", "gpu", device="cuda").train() == cpu
