"""CUDA tensors committed where they live (issue #40): the GPU's chunk tree passes its
self-check, and every committed dtype, a view, a 0-d tensor and a 256 MB tensor get the root
their host copy gets. (The models' GPU tests compare whole-run roots with the CPU's: their
traced steps commit activations this way.)"""
import pytest
import torch

from kernel_samples import backend_table  # (tests/repops: see conftest.py)
from offchain.protocol import chunktree
from offchain.protocol.tensors import commit_sealed

pytestmark = pytest.mark.gpu


@pytest.fixture
def on_device(monkeypatch):
    backend_table("cuda")  # skips without a device
    monkeypatch.setattr(chunktree, "DEVICE_MIN_BYTES", 0)  # every tensor takes the device path
    rt = chunktree.device_runtime()
    assert rt is not None, "the GPU's chunk tree failed its self-check (see the warning)"
    calls = []
    real = chunktree.tree_on_device
    monkeypatch.setattr(chunktree, "tree_on_device", lambda *a, **k: calls.append(1) or real(*a, **k))
    return calls


def _tensors():
    g = torch.Generator().manual_seed(3)
    x = torch.randn(67, 129, generator=g)
    return {"float32": x, "transposed view": x.t(), "0-d": x[3, 5], "int64": torch.randint(-2**40, 2**40, (999,), generator=g),
            "int32": torch.randint(-2**31, 2**31 - 1, (5, 77), generator=g, dtype=torch.int32),
            "uint8": torch.randint(0, 256, (4097,), generator=g, dtype=torch.uint8), "bool": x > 0}


@pytest.mark.parametrize("name", list(_tensors()))
@pytest.mark.parametrize("chunk", [1, 64, 256])
def test_a_cuda_tensor_committed_on_the_gpu_has_its_host_root(on_device, name, chunk):
    t = _tensors()[name]
    assert commit_sealed(t.cuda(), chunk) == commit_sealed(t, chunk)
    assert on_device, "the device path was not taken"


def test_a_256_mb_tensor(on_device):
    t = torch.randn(64 * 2**20, device="cuda")
    assert commit_sealed(t, 256) == commit_sealed(t.cpu(), 256)


@pytest.mark.parametrize("later", [True, False], ids=["tops-read-after-the-step", "tops-read-at-once"])
def test_a_gpu_trainer_committing_every_tensor_on_the_gpu_posts_the_cpu_trainer_claims(on_device, tmp_path,
                                                                                      monkeypatch, later):
    """Every state tensor and activation of every traced step hashed where it lives (the
    threshold lowered to 0 bytes: the tiny job's tensors are all under the default's), and
    each claim is the CPU trainer's: with the trees' tops read once the step is over
    (offchain/protocol/trace.py LATER, the default), and read at each op."""
    from offchain.protocol import trace
    monkeypatch.setattr(trace, "LATER", later)
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "protocol"))
    from small_job import write_small_job

    from offchain.protocol.jobfile import load
    from offchain.trainer import Trainer
    job = load(write_small_job(tmp_path / "job"))
    cpu = Trainer(job, tmp_path / "cpu", "cpu")
    gpu = Trainer(job, tmp_path / "gpu", "gpu", device="cuda")
    assert gpu.train() == cpu.train()
    assert gpu.claims == cpu.claims
    assert len(on_device) > 100, len(on_device)
