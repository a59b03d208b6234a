"""torch's random-number calls inside a key on a real GPU (repops/draws.py): each is a
composition of RepOps ops over dropout's Philox bits, so on CUDA tensors it must give the
CPU's bits: floats bit for bit, integers (randint, randperm, multinomial's indices) equal.
torch's own generators differ between CPU and CUDA; RepOps' may not."""
import pytest
import torch

import repops
from kernel_samples import backend_table  # (tests/repops: see conftest.py)
from repops.random import dropout_key

pytestmark = pytest.mark.gpu

P = torch.tensor([[0.1, 0.0, 0.6, 0.3, 0.0], [1.0, 2.0, 3.0, 4.0, 5.0]])
DRAWS = {
    "rand": lambda d: torch.rand(3, 70, device=d),
    "randn": lambda d: torch.randn(257, device=d),
    "randint": lambda d: torch.randint(-3, 1000, (40,), device=d),
    "randperm": lambda d: torch.randperm(300, device=d),
    "bernoulli": lambda d: torch.bernoulli(torch.linspace(0, 1, 50, device=d)),
    "uniform_": lambda d: torch.empty(2, 33, device=d).uniform_(-2.0, 6.0),
    "normal_": lambda d: torch.empty(65, device=d).normal_(3.0, 0.5),
    "multinomial": lambda d: torch.multinomial(P.to(d), 200, replacement=True),
    "multinomial_without_replacement": lambda d: torch.multinomial(P.to(d), 3),
}


@pytest.mark.parametrize("name", sorted(DRAWS))
def test_a_draw_on_the_gpu_is_the_cpu_s(name):
    backend_table("cuda")  # skips without a device
    got = {}
    for device in ("cpu", "cuda"):
        with repops.deterministic(), dropout_key(12, 5):
            torch.rand(7, device=device)  # stream 0: the draw below is a later call's stream
            got[device] = DRAWS[name](device).cpu()
    a, b = got["cpu"], got["cuda"]
    assert a.dtype == b.dtype and a.shape == b.shape
    assert torch.equal(a.view(torch.int32) if a.dtype == torch.float32 else a,
                       b.view(torch.int32) if b.dtype == torch.float32 else b)
