"""The decomposed operator that levels 3-5 play on (offchain/dispute/oprun.py): the
referee's dtype rules hold for every kernel the reference emits, and the structure (names
and operand descriptors) does not depend on values."""
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import repops
from offchain.dispute.kernels import operand_code, result_code
from offchain.dispute.oprun import OpRun, decode_kernel
from offchain.protocol.tensors import DTYPES
from offchain.protocol.trace import StepRecorder
from repops.reference.prims import observe

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "repops"))
from repops_samples import SAMPLES  # noqa: E402


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_every_kernel_has_the_operand_and_result_dtypes_the_referee_expects(name):
    """Level 4 condemns a party whose tensor header differs from what the primitive table
    implies; this checks the honest reference never does so (forward and backward)."""
    fn, make = SAMPLES[name]
    seen = []
    xs = [x.detach().requires_grad_(x.is_floating_point()) for x in make()]
    with observe(lambda k, args, out: seen.append((k, [np.asarray(a).dtype for a in args], np.asarray(out).dtype))):
        with repops.deterministic("reference"):
            out = fn(*xs)
            out.float().sum().backward()
    assert seen
    for k, ins, out in seen:
        assert DTYPES[out] == result_code(k), (k, out)
        for i, d in enumerate(ins):
            assert DTYPES[d] == operand_code(k, i), (k, i, d)


def _structures(nodes_inputs):
    return [[(n, d) for n, d, _, _ in map(decode_kernel, (k.encode() for k in OpRun(s, ins, 8).kernels()))]
            for s, ins in nodes_inputs]


def test_the_decomposition_structure_does_not_depend_on_values():
    """Same ops on other values (zero inputs make the gathered log-probabilities all equal,
    which a value-based rule would call a constant): the same kernel names and descriptors."""
    y = torch.tensor([0, 2, 1, 2, 0])

    def step(x, w):
        rec = StepRecorder([x, w], [y], chunk=8, keep=True)
        with repops.deterministic(trace=rec):
            torch.nn.functional.cross_entropy(torch.nn.functional.linear(x, w).softmax(-1), y)
        return rec
    g = torch.Generator().manual_seed(3)
    a = (torch.randn(5, 7, generator=g), torch.randn(3, 7, generator=g))
    b = (torch.zeros(5, 7), torch.randn(3, 7, generator=g))
    structures = []
    for x, w in (a, b):
        rec = step(x, w)

        def value(ref, state=(x, w), outs=rec.outputs):
            return {0: lambda: outs[ref.index][ref.slot], 1: lambda: state[ref.index], 2: lambda: y}[ref.kind]()
        structures.append(_structures([(n.structure(), [value(r) for r in n.refs]) for n in rec.nodes]))
    assert structures[0] == structures[1]
    assert any(d[0] == 1 for node in structures[0] for _, ds in node for d in ds)  # constants are there
