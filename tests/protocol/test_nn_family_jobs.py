"""The op families of issues #38/#39 in a model and as a job: a small sequence model with the
activation zoo, a Hugging Face-style classifier pooling (`h[arange(B), last_token]`, two index
tensors), Falcon's negative index list (`h[..., [-2], :]`), and a regression plus multi-label
head trained on every loss (mse, l1, smooth_l1, huber, bce, bce_with_logits). It trains with the
same bits on 1 and 2 threads and on the CPU backend and the numpy spec, its first loss is
native torch's to rounding, and as a job every node of its step settles on chain."""
import pytest
import torch
import torch.nn.functional as F

import repops
from offchain.dispute.context import Context
from offchain.protocol.dataset import write_program_job
from offchain.protocol.jobfile import load
from offchain.trainer import Trainer
from repops.models.quick_train import num_threads
from repops.optim import AdamW

B, T, V, D = 4, 5, 20, 16


class Heads(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.emb = torch.nn.Embedding(V, D)
        self.a, self.b, self.c = torch.nn.Linear(D, D), torch.nn.Linear(D, D), torch.nn.Linear(D, D)
        self.reg, self.cls = torch.nn.Linear(D, 2), torch.nn.Linear(D, 3)

    def forward(self, ids, last, y, labels):
        h = self.emb(ids)
        h = F.mish(self.a(h)) + F.softplus(self.a(h), beta=2.0) - F.logsigmoid(h)
        h = F.elu(self.b(h)) * F.hardswish(h) + F.leaky_relu(self.c(h), 0.1) + F.selu(h) * F.hardsigmoid(h)
        h = F.hardtanh(h, -2.0, 2.0) + F.relu6(h) * 0.1 + F.celu(h) * 0.5
        pooled = h[torch.arange(h.shape[0]), last]            # the last token of each row
        falcon = h[..., [-2], :].squeeze(1)                   # the second-to-last position
        reg = self.reg(pooled + falcon)
        logits = self.cls(pooled)
        target = labels.float()
        return (F.mse_loss(reg, y) + F.l1_loss(reg, y) + F.smooth_l1_loss(reg, y, beta=0.5)
                + F.huber_loss(reg, y, delta=0.7) + F.binary_cross_entropy_with_logits(logits, target)
                + F.binary_cross_entropy(torch.sigmoid(logits), target))


def _batch(seed):
    g = torch.Generator().manual_seed(seed)
    return (torch.randint(0, V, (B, T), generator=g), torch.randint(0, T, (B,), generator=g) - T * (seed % 2),
            torch.randn(B, 2, generator=g), torch.randint(0, 2, (B, 3), generator=g))


def _train(backend="cpu", threads=1, steps=2):
    model = Heads()
    opt = AdamW(model.parameters(), lr=1e-2)
    losses, batches = [], [_batch(s) for s in range(steps)]  # (drawn outside RepOps)
    with num_threads(threads), repops.deterministic(backend):
        for batch in batches:
            opt.zero_grad(set_to_none=True)
            loss = model(*batch)
            loss.backward()
            opt.step()
            losses.append(loss.detach())
    return torch.stack(losses), torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def _bits(t):
    return t.contiguous().view(torch.int32)


def test_the_families_train_with_the_same_bits_on_threads_and_backends_and_as_torch_means():
    l1, p1 = _train(threads=1)
    l2, p2 = _train(threads=2)
    lr, pr = _train("reference", steps=1)
    assert torch.equal(_bits(l1), _bits(l2)) and torch.equal(_bits(p1), _bits(p2))
    assert torch.equal(_bits(l1[:1]), _bits(lr)) and not torch.equal(_bits(p1), _bits(pr))  # (one step vs two)
    _, p_one = _train(steps=1)
    assert torch.equal(_bits(p_one), _bits(pr))
    native = Heads()(*_batch(0))
    torch.testing.assert_close(l1[0], native.detach(), rtol=1e-5, atol=1e-6)


@pytest.mark.xdist_group("nn_family_job")
def test_a_job_of_the_families_traces_its_committed_graph_and_every_node_settles_on_chain(tmp_path):
    data = {k: torch.cat([a, b]) for k, a, b in zip(("ids", "last", "y", "labels"), _batch(0), _batch(1))}
    job = load(write_program_job(tmp_path / "job", Heads(), data, list(data), steps=2, batch_size=B, fanout=2))
    ctx = Context(job)
    traced = Trainer(job, tmp_path / "t", "t").step_trace(0)
    assert [n.structure() for n in traced.nodes] == ctx.graph.structures
    assert ctx.kernel_graph.unsettled == []
    ops = {n.op for n in traced.nodes}
    assert {"aten.index.Tensor", "aten.mse_loss.default", "aten.binary_cross_entropy_with_logits.default",
            "aten.mish.default", "aten.elu_backward.default", "aten.index_put.default"} <= ops, ops
    one, two = Trainer(job, tmp_path / "one", "one"), Trainer(job, tmp_path / "two", "two")
    assert one.train() == two.train()
