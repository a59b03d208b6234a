"""Whole training under repops.deterministic(): same SHA-256 of the final parameters with
different thread counts (and backends), and the model really learns."""
import pytest
import torch

import repops
from repops.models import build
from repops.models.quick_train import quick_train as train
from repops.optim import AdamW


@pytest.mark.parametrize("name", ["mlp", "llama"])
def test_twenty_steps_same_hash_with_1_and_2_threads_and_loss_falls(name):
    h1, l1 = train(name, 20, 1)
    h2, l2 = train(name, 20, 2)
    assert h1 == h2
    assert l1 == l2
    assert sum(l1[-4:]) / 4 < 0.8 * sum(l1[:4]) / 4, f"loss did not fall: {l1}"


def test_cpu_backend_equals_reference_backend_over_training():
    assert train("mlp", 5, 2, "cpu") == train("mlp", 5, 2, "reference")


def test_repops_adamw_is_the_same_algorithm_as_torch_adamw():
    """RepOps' AdamW differs from torch's only in how its scalars are computed (binary32
    tensors vs Python doubles from libm pow), so the updates agree to rounding."""
    torch.manual_seed(0)
    m1, m2 = build("mlp"), build("mlp")
    m2.load_state_dict(m1.state_dict())
    x, y = torch.randn(8, 32), torch.randint(0, 10, (8,))
    outs = []
    for m, opt in ((m1, AdamW(m1.parameters(), lr=1e-2)), (m2, torch.optim.AdamW(m2.parameters(), lr=1e-2, foreach=False))):
        for _ in range(3):
            opt.zero_grad()
            with repops.deterministic():
                m.loss(x, y).backward()
            opt.step()  # torch's AdamW is refused inside RepOps (tests/repops/test_models.py)
        outs.append(torch.cat([p.detach().flatten() for p in m.parameters()]))
    torch.testing.assert_close(outs[0], outs[1], rtol=1e-3, atol=1e-5)  # same algorithm


@pytest.mark.parametrize("name", ["mlp", "llama"])
def test_inference_equals_training_forward_and_never_falls_back(name):
    from repops import aten as A
    torch.manual_seed(0)
    model = build(name)
    x = (torch.randn(4, 32),) if name == "mlp" else (torch.randint(0, 256, (2, 9)),)
    with repops.deterministic():
        want = model(*x).detach()
    for ctx in (torch.no_grad, torch.inference_mode):
        ops = []
        with ctx(), repops.deterministic(trace=lambda f, a, k, o: ops.append(f)):
            got = model(*x)
        assert torch.equal(got.view(torch.int32), want.view(torch.int32)), ctx.__name__
        assert all(f in A.REGISTRY or f in A.EXACT for f in ops), [str(f) for f in ops if f not in A.REGISTRY and f not in A.EXACT]
