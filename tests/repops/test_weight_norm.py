"""Weight norm (torch.nn.utils.parametrizations.weight_norm and the older nn.utils.weight_norm:
wav2vec2's and HuBERT's positional convolution) under RepOps: torch._weight_norm is routed above
autograd to the composition torch runs for a middle dim, v * (g / norm_except_dim(v, 2, dim)), so
its backward is autograd's of RepOps pieces; the fused path's backward
(aten._weight_norm_interface_backward) has no definition and refused a HuBERT step before."""
import pytest
import torch

import repops
from offchain.protocol import program


def _conv(dim, parametrized):
    torch.manual_seed(0)
    conv = torch.nn.Conv1d(4, 6, 3, padding=1)
    wn = torch.nn.utils.parametrizations.weight_norm if parametrized else torch.nn.utils.weight_norm
    return wn(conv, dim=dim)


def _step(module, x):
    for p in module.parameters():
        p.grad = None
    y = module(x)
    (y * y).sum().backward()
    return [y.detach()] + [p.grad.clone() for p in module.parameters()]


def _bits(ts):
    return [t.view(torch.int32) for t in ts]


@pytest.mark.parametrize("parametrized", [True, False], ids=["parametrizations", "hook"])
@pytest.mark.parametrize("dim", [0, 1, 2, -1])
def test_weight_norm_trains_near_torch_with_the_same_bits_on_every_backend(dim, parametrized):
    conv, x = _conv(dim, parametrized), torch.randn(2, 4, 8, generator=torch.Generator().manual_seed(1))
    native = _step(conv, x)
    with repops.deterministic():
        cpu = _step(conv, x)
    with repops.deterministic("cuda-emu"):
        emu = _step(conv, x)
    for a, b in zip(native, cpu):
        assert float((a - b).abs().max()) <= 1e-5 * float(a.abs().max()), (a, b)
    assert all(torch.equal(a, b) for a, b in zip(_bits(cpu), _bits(emu)))


def test_a_weight_norm_program_steps_with_the_modules_bits():
    class Loss(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = _conv(2, True)

        def forward(self, x):
            return (self.conv(x) ** 2).sum()

    module, x = Loss(), torch.randn(2, 4, 8, generator=torch.Generator().manual_seed(1))
    data, state = program.export(module, (x,))
    prog = program.load(data, {k: v.clone() for k, v in state.items()})
    runs = []
    for m, f in ((prog, prog.loss), (module, module)):
        m.zero_grad(set_to_none=True)
        with repops.deterministic():
            out = f(x)
            out.backward()
        runs.append([out.detach()] + [p.grad for _, p in sorted(m.named_parameters())])
    assert len(runs[0]) == len(runs[1]) == 4
    assert all(torch.equal(a, b) for a, b in zip(_bits(runs[0]), _bits(runs[1])))
