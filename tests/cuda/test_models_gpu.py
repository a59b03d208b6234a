"""Models we did not write (tests/repops/model_zoo.py) on a real GPU: the same ops in the same
order as on the CPU, and two training steps with the CPU's bits. The emulator cannot show
this: torch itself picks other kernels (cuDNN RNNs, flash attention) for CUDA tensors, and
only a GPU shows whether RepOps captures them above that choice."""
import copy

import pytest
import torch

import repops
from kernel_samples import backend_table  # (tests/repops: see conftest.py)
from model_zoo import MODELS
from test_dropout import WithEverything, _train as train_dropping
from test_models import bits, train

pytestmark = pytest.mark.gpu


def _ops(name, device):
    """The ops a step computes, in order; a copy between devices (a model's CPU constant
    moved to the GPU: labels, a mask) computes nothing and is left out."""
    model, batch, loss = MODELS[name]()
    model.to(device)
    seen, args = [], [a.to(device) for a in batch(0)]  # random data is drawn outside RepOps

    def record(func, args, kwargs, out):
        if not (func == torch.ops.aten._to_copy.default and args[0].device != out.device):
            seen.append(str(func))
    with repops.deterministic(trace=record):
        loss(model, *args).backward()
    return seen


@pytest.mark.parametrize("name", sorted(MODELS))
def test_a_step_records_the_same_ops_on_the_gpu(name):
    backend_table("cuda")  # skips without a device
    gpu, cpu = _ops(name, "cuda"), _ops(name, "cpu")
    first = next((i for i, (a, b) in enumerate(zip(gpu, cpu)) if a != b), min(len(gpu), len(cpu)))
    assert gpu == cpu, f"from op {first}: GPU {gpu[first - 2:first + 4]}, CPU {cpu[first - 2:first + 4]}"


@pytest.mark.parametrize("name", sorted(MODELS))
def test_training_on_the_gpu_gives_the_cpu_bits(name):
    backend_table("cuda")
    l_gpu, p_gpu = train(name, device="cuda")
    l_cpu, p_cpu = train(name)
    assert torch.equal(bits(p_gpu), bits(p_cpu))
    assert all(torch.equal(bits(a), bits(b)) for a, b in zip(l_gpu, l_cpu)) and len(l_gpu) == len(l_cpu) == 2


def test_every_dropout_path_draws_the_cpu_masks_on_the_gpu():
    """Philox on the device: nn.Dropout, F.dropout, SDPA's and MultiheadAttention's dropout,
    an LSTM's dropout between layers."""
    backend_table("cuda")
    torch.manual_seed(0)
    model = WithEverything()
    l_cpu, p_cpu = train_dropping(copy.deepcopy(model), "cpu")
    l_gpu, p_gpu = train_dropping(copy.deepcopy(model), "cpu", device="cuda")
    assert all(torch.equal(bits(a.cpu()), bits(b)) for a, b in zip(l_gpu + p_gpu, l_cpu + p_cpu))
