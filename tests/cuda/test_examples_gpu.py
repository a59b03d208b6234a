"""The jobs of examples/ (a client's own programs: the torch.export graph of a CNN with batch
norm, a Hugging Face GPT-2, a LoRA fine-tune, an inference job) trained on the GPU commit
the CPU's claim: what `verde train JOB --device cuda` and a trainer agent on a GPU run.

A client builds a job with the pinned torch (requirements.lock); the lent GPU machines have
another (2.11), whose torch.export cannot write our programs but loads them. There
scripts/gpu-wheels.sh builds the jobs beforehand into .whl/jobs, and scripts/gpu-check.sh
names that folder in VERDE_EXAMPLE_JOBS; without it each job is built here."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernel_samples import backend_table  # (tests/repops: see conftest.py)
from offchain.protocol.jobfile import load
from offchain.trainer import Trainer

EXAMPLES = {"cnn": ["--steps", "2"], "gpt2": ["--steps", "2"], "lora": ["--steps", "2"], "inference": []}


def example_job(name, out: Path) -> Path:
    """examples/NAME's job, as its make_job.py writes it (2 steps where it trains)."""
    made = subprocess.run([sys.executable, f"examples/{name}/make_job.py", str(out), *EXAMPLES[name]],
                          capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    return out / "job.yaml"


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_an_example_job_on_the_gpu_commits_the_cpu_claim(name, tmp_path):
    backend_table("cuda")  # skips without a device
    built = os.environ.get("VERDE_EXAMPLE_JOBS")
    job = load(Path(built) / name / "job.yaml" if built else example_job(name, tmp_path / "job"))
    cpu = Trainer(job, tmp_path / "cpu", "cpu").train()
    assert Trainer(job, tmp_path / "gpu", "gpu", device="cuda").train() == cpu


if __name__ == "__main__":  # python tests/cuda/test_examples_gpu.py DIR: build every job into DIR/NAME
    for n in EXAMPLES:
        print(example_job(n, Path(sys.argv[1]) / n))
