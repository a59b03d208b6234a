"""Levels 3-5 read the same bytes on both sides: Kernels.sol/OneStep.sol (through
KernelsHarness) against offchain/dispute (oprun.element_of, operand_shape, decode_kernel,
level5_primitive), on every descriptor kind the reference emits (VIEW, CONST, CAT with
steps, as stack and the strided slice_backward of the Llama-style model make them) and on
hand-made CAT/VIEW descriptors; indices drawn at random plus the ends."""
import random

import numpy as np
import pytest
import torch

import repops
from offchain.softfloat import float32 as sf
from offchain.dispute import kernels as L5
from offchain.dispute.oprun import CAT, OpRun, cat, constant, element_of, operand_shape, view
from offchain.protocol.trace import StepRecorder


def _opcode(name: str) -> int:
    """OneStep.opcodeOf's numbering: the soft-float's opcodes, then the index moves and result."""
    return {"gather": 100, "onehot": 101, "result": 200}.get(name, sf.PRIMITIVES.get(name, (None,))[0])


@pytest.fixture(scope="module")
def harness(embedded):
    return embedded.deploy("KernelsHarness")


def _kernels():
    """The decomposition of a step of a small model with stack, strided slices and clone."""
    g = torch.Generator().manual_seed(1)
    x = torch.randn(2, 3, 8, generator=g, requires_grad=True)
    w = torch.randn(8, 8, generator=g, requires_grad=True)
    rec = StepRecorder([x, w], [], chunk=8, keep=True)
    with repops.deterministic(trace=rec):
        y = torch.stack([x[..., 0::2], x[..., 1::2]], -1).reshape(2, 3, 8)
        (y.clone() @ w).relu().sum().backward()
    out = []
    for n in rec.nodes:
        ins = [rec.outputs[r.index][r.slot] if r.kind == 0 else (x, w)[r.index] for r in n.refs]
        out += OpRun(n.structure(), ins, 8).kernels()
    return out


def _check(harness, d, rng):
    shape = operand_shape(d)
    assert list(harness.functions.shape(d).call()) == list(shape)
    n = int(np.prod(shape)) if shape else 1
    for flat in {0, n - 1, *(rng.randrange(n) for _ in range(6))}:
        isview, source, at = harness.functions.sourceOf(d, flat).call()
        src = element_of(d, flat)
        if src[0] == "view":
            assert (isview, source, at) == (True, src[1], src[2]), (d.hex(), flat)
        else:
            assert not isview and at == int.from_bytes(src[1], "little"), (d.hex(), flat)


def test_kernel_encodings_and_descriptors_agree(harness):
    rng = random.Random(0)
    kinds = set()
    for k in _kernels():
        structure, ops, out = harness.functions.structureOf(k.encode()).call()
        assert structure == k.structure() and list(ops) == k.operands and out == k.output
        assert harness.functions.opcodeOf(k.name.encode()).call() == _opcode(k.name)
        for d in k.descriptors:
            kinds.add(d[0])
            _check(harness, d, rng)
    assert kinds == {0, 1, CAT}, kinds  # views, constants and pieces all exercised


def test_hand_made_pieces_agree(harness):
    rng = random.Random(1)
    background = 0.5
    d = cat(1, [3, 7, 2], [(0, 3, 3, view(0, 4, [3, 3, 2], [1, 9, 0])),
                           (1, 3, 2, constant(np.float32(-2.0), [3, 2, 2])),
                           (5, 1, 2, view(2, 0, [3, 2, 2], [4, 2, 1]))], background)
    _check(harness, d, rng)
    _check(harness, view(1, 7, [4, 1, 5], [-1, 0, 3]), rng)


@pytest.mark.parametrize("name,shapes", [("add", [(3, 1, 4), (5, 1)]), ("fma", [(2, 3), (3,), (1, 1)]),
                                         ("gather", [(2, 5, 3), (2, 4), ()]), ("onehot", [(6,), (6,), (9,)]),
                                         ("select", [(4, 1), (1, 4), ()])])
def test_broadcasting_and_output_shapes_agree(harness, name, shapes):
    code = _opcode(name)
    out = L5.output_shape(name, [tuple(s) for s in shapes])
    assert tuple(harness.functions.outputShape(code, [list(s) for s in shapes]).call()) == tuple(out)
    if name in L5.INDEX_OPERAND:
        return
    n = int(np.prod(out))
    for flat in range(n):
        for s in shapes:
            assert harness.functions.operandIndex(list(out), flat, list(s)).call() == L5.operand_index(out, flat, tuple(s))


def test_the_result_rules_of_integer_padding_and_selects_backward_agree(harness):
    """What Hugging Face's causal-LM loss does to its int64 labels (a pad with -100: a CAT
    over an int64 background) and what a select's backward returns (the gradient placed in
    zeros): described from the op's meaning, read the same on chain."""
    import torch.nn.functional as F
    g = torch.Generator().manual_seed(2)
    labels = torch.randint(0, 50, (2, 6), generator=g)
    x = torch.randn(3, 4, 5, generator=g, requires_grad=True)
    rec = StepRecorder([x], [labels], chunk=8, keep=True)
    with repops.deterministic(trace=rec):
        padded = F.pad(labels, (0, 1), value=-100)
        (x.select(1, -2) * padded[:, :5].sum().float()).sum().backward()
    rng, seen = random.Random(2), set()
    for n in rec.nodes:
        ins = [rec.outputs[r.index][r.slot] if r.kind == 0 else ((x,), (labels,))[r.kind - 1][r.index] for r in n.refs]
        op = n.structure()[5:5 + int.from_bytes(n.structure()[1:5], "big")].decode()
        if op in ("aten.constant_pad_nd.default", "aten.select_backward.default"):
            result = OpRun(n.structure(), ins, 8).kernels()[-1]
            assert result.descriptors[0][0] == CAT, op
            _check(harness, result.descriptors[0], rng)
            seen.add(op)
    assert seen == {"aten.constant_pad_nd.default", "aten.select_backward.default"}
