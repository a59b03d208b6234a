"""The index moves (prims.gather/onehot) and the ops built on them: the same bits as the
formulas they replace, and decompositions without MAT operands (what the on-chain referee
needs: docs/PROTOCOL.md §7)."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import repops
from offchain.dispute.oprun import MAT, OpRun
from offchain.protocol.trace import StepRecorder


def _bits(t):
    return t.detach().numpy().view(np.uint32)


def test_embedding_backward_is_the_increasing_position_sum_for_finite_gradients():
    g = torch.Generator().manual_seed(0)
    idx = torch.tensor([[3, 1, 3, 0], [3, 5, 1, 3]])
    grad = torch.randn(2, 4, 6, generator=g) * torch.tensor([1e-3, 1.0, 1e4, -2.0, 0.0, -0.0])
    with repops.deterministic():
        out = torch.ops.aten.embedding_dense_backward(grad, idx, 7, -1, False)
    want = np.zeros((7, 6), np.float32)  # +0, then row += grad[p] in increasing p
    for p, w in enumerate(idx.reshape(-1).tolist()):
        want[w] = want[w] + grad.reshape(8, 6)[p].numpy()
    assert (_bits(out) == want.view(np.uint32)).all()


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_nll_with_ignored_rows_matches_the_masked_formula(reduction):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(6, 5, generator=g).log_softmax(-1).requires_grad_()
    t = torch.tensor([1, -100, 4, 0, -100, 2])
    with repops.deterministic():
        loss = F.nll_loss(x, t, reduction=reduction)
        loss.sum().backward()
    keep = (t != -100).numpy()
    picked = np.where(keep, x.detach().numpy()[np.arange(6), np.where(keep, t.numpy(), 0)], np.float32(0))
    terms = np.where(keep, -picked, np.float32(0.0 if reduction == "none" else -0.0)).astype(np.float32)
    if reduction == "none":
        want = terms
    else:
        s = terms[0]
        for v in terms[1:]:
            s = np.float32(s + v)
        want = np.float32(s / np.float32(keep.sum())) if reduction == "mean" else s
    assert (_bits(loss).reshape(-1) == np.asarray(want, np.float32).reshape(-1).view(np.uint32)).all()
    grad = x.grad.numpy()
    assert (grad[~keep] == 0).all() and (np.signbit(grad[~keep]) == False).all()  # noqa: E712
    assert (grad[keep, t.numpy()[keep]] != 0).all()


def test_an_index_outside_the_table_is_an_error():
    w = torch.randn(4, 3)
    with pytest.raises(IndexError, match="outside"), repops.deterministic():
        F.embedding(torch.tensor([0, 9]), w)


def test_the_model_ops_decompose_without_materialised_operands():
    g = torch.Generator().manual_seed(2)
    w = torch.randn(11, 4, generator=g, requires_grad=True)
    idx = torch.tensor([[1, 7, 1], [0, 10, 7]])
    y = torch.tensor([2, 0, 1, 3, 3, 1])
    rec = StepRecorder([w], [idx, y], chunk=8, keep=True)
    with repops.deterministic(trace=rec):
        h = F.embedding(idx, w).reshape(6, 4)
        F.cross_entropy(torch.stack([h, h * 2], -1).sum(-1), y).backward()
    mats = []
    for n in rec.nodes:
        ins = [rec.outputs[r.index][r.slot] if r.kind == 0 else (w,)[r.index] if r.kind == 1 else (idx, y)[r.index]
               for r in n.refs]
        for k in OpRun(n.structure(), ins, 8).kernels():
            mats += [(n.structure()[5:40], k.name) for d in k.descriptors if d[0] == MAT]
    assert not mats, mats
