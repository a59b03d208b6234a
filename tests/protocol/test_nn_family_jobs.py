"""The op families of issues #38/#39 in a model and as a job: a small sequence model with the
activation zoo, top-2 expert routing (topk, scatter, argmax), sort, cumsum and pow, a Hugging
Face-style classifier pooling (`h[arange(B), last_token]`, two index tensors), Falcon's negative
index list (`h[..., [-2], :]`), and a regression plus multi-label head trained on every loss
(mse, l1, smooth_l1, huber, bce, bce_with_logits). It trains with the
same bits on 1 and 2 threads and on the CPU backend and the numpy spec, its first loss is
native torch's to rounding, as a job every node of its step settles on chain, and a trainer
that flips one routing decision loses the dispute at the topk node."""
import dataclasses

import pytest
import torch
import torch.nn.functional as F

import repops
from offchain.dispute.context import Context
from offchain.protocol.dataset import write_program_job
from offchain.protocol.jobfile import load
from offchain.protocol.trace import decode_structure
from offchain.trainer import Trainer
from offchain.trainer import adversaries as A
from playing import honest_paid_on_chain, honest_wins_off_chain
from stepping import adamw_steps, bits

B, T, V, D, E = 4, 5, 20, 16, 4


class Heads(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.emb = torch.nn.Embedding(V, D)
        self.a, self.b, self.c = torch.nn.Linear(D, D), torch.nn.Linear(D, D), torch.nn.Linear(D, D)
        self.reg, self.cls = torch.nn.Linear(D, 2), torch.nn.Linear(D, 3)
        self.router, self.experts = torch.nn.Linear(D, E), torch.nn.Linear(D, D * E)
        self.scale = torch.nn.Parameter(torch.full((D,), 0.3))

    def forward(self, ids, last, y, labels):
        h = self.emb(ids)
        h = F.mish(self.a(h)) + F.softplus(self.a(h), beta=2.0) - F.logsigmoid(h)
        h = F.elu(self.b(h)) * F.hardswish(h) + F.leaky_relu(self.c(h), 0.1) + F.selu(h) * F.hardsigmoid(h)
        h = F.hardtanh(h, -2.0, 2.0) + F.relu6(h) * 0.1 + F.celu(h) * 0.5
        h = h + self._routed(h) + torch.pow(self.scale.abs() + 1, h.tanh()) + h.cumsum(1) * 0.1
        h = h + (torch.sigmoid(h) + 0.5).pow(1.5) + h.sort(-1).values * 0.1 + h.amax(-1, keepdim=True)
        pooled = h[torch.arange(h.shape[0]), last]            # the last token of each row
        falcon = h[..., [-2], :].squeeze(1)                   # the second-to-last position
        reg = self.reg(pooled + falcon)
        logits = self.cls(pooled)
        target = labels.float()
        return (F.mse_loss(reg, y) + F.l1_loss(reg, y) + F.smooth_l1_loss(reg, y, beta=0.5)
                + F.huber_loss(reg, y, delta=0.7) + F.binary_cross_entropy_with_logits(logits, target)
                + F.binary_cross_entropy(torch.sigmoid(logits), target))


    def _routed(self, h):
        """Top-2 of E experts, Mixtral-style: softmax over the chosen logits, scattered into a
        dense gate (scatter.src), every expert computed and mixed by its gate."""
        logits = self.router(h)
        top, idx = logits.topk(2, -1)
        gate = torch.zeros_like(logits).scatter(-1, idx, torch.softmax(top, -1))
        out = self.experts(h).unflatten(-1, (E, D))
        return (gate.unsqueeze(-1) * out).sum(-2) + logits.argmax(-1, keepdim=True).float() * 0.01


def _batch(seed):
    g = torch.Generator().manual_seed(seed)
    return (torch.randint(0, V, (B, T), generator=g), torch.randint(0, T, (B,), generator=g) - T * (seed % 2),
            torch.randn(B, 2, generator=g), torch.randint(0, 2, (B, 3), generator=g))


def _train(backend="cpu", threads=1, steps=2):
    return adamw_steps(Heads(), [_batch(s) for s in range(steps)], backend, threads)  # (batches drawn outside RepOps)


def test_the_families_train_with_the_same_bits_on_threads_and_backends_and_as_torch_means():
    l1, p1 = _train(threads=1)
    l2, p2 = _train(threads=2)
    lr, pr = _train("reference", steps=1)
    assert torch.equal(bits(l1), bits(l2)) and torch.equal(bits(p1), bits(p2))
    assert torch.equal(bits(l1[:1]), bits(lr)) and not torch.equal(bits(p1), bits(pr))  # (one step vs two)
    _, p_one = _train(steps=1)
    assert torch.equal(bits(p_one), bits(pr))
    native = Heads()(*_batch(0))
    torch.testing.assert_close(l1[0], native.detach(), rtol=1e-5, atol=1e-6)


@dataclasses.dataclass
class FlipsARoute(A.CorruptValue):
    """Routes one token to the next expert (topk's index + 1); its decomposition stays honest."""
    name = "flips-a-route"
    level = 3

    def before_record(self, step, index, func, args, kwargs, out):
        if (step, index) == (self.step, self.node):
            out[1].view(-1)[self.element] = (out[1].view(-1)[self.element] + 1) % E

    def kernel_tamper(self, step, node, n_kernels):
        return None


@pytest.fixture(scope="module")
def routed(tmp_path_factory):
    """The families' job, its referee context and an honest trainer that trained it."""
    d = tmp_path_factory.mktemp("routed")
    data = {k: torch.cat([a, b]) for k, a, b in zip(("ids", "last", "y", "labels"), _batch(0), _batch(1))}
    job = load(write_program_job(d / "job", Heads(), data, list(data), steps=2, batch_size=B, fanout=2))
    honest = Trainer(job, d / "honest", "honest")
    honest.train()
    return job, Context(job), honest, d


def _topk_node(ctx):
    return next(j for j, s in enumerate(ctx.graph.structures) if decode_structure(s)[0] == "aten.topk.default")


@pytest.mark.xdist_group("nn_family_job")
def test_a_job_of_the_families_traces_its_committed_graph_and_every_node_settles_on_chain(routed):
    job, ctx, honest, d = routed
    traced = Trainer(job, d / "t", "t").step_trace(0)
    assert [n.structure() for n in traced.nodes] == ctx.graph.structures
    assert ctx.kernel_graph.unsettled == []
    ops = {n.op for n in traced.nodes}
    assert {"aten.index.Tensor", "aten.mse_loss.default", "aten.binary_cross_entropy_with_logits.default",
            "aten.mish.default", "aten.elu_backward.default", "aten.index_put.default", "aten.topk.default",
            "aten.scatter.src", "aten.sort.default", "aten.cumsum.default", "aten.pow.Tensor_Tensor",
            "aten.argmax.default"} <= ops, ops
    assert Trainer(job, d / "two", "two").train() == honest.final_claim()


@pytest.mark.xdist_group("nn_family_job")
def test_a_cheater_who_flips_a_routing_decision_loses_at_the_topk_node(routed):
    """The expert indices topk returns are int64 kernel outputs of its decomposition: a trainer
    that routes one token to another expert is caught at that node, level 3, in either seat."""
    job, ctx, honest, d = routed
    node = _topk_node(ctx)
    bad = Trainer(job, d / "cheater", "cheater", behaviour=FlipsARoute(step=1, node=node, element=3))
    assert bad.train() != honest.final_claim()
    for v in honest_wins_off_chain(ctx, honest, bad):
        assert v.node == node and v.level == 3, str(v)


@pytest.mark.xdist_group("nn_family_job")
def test_the_route_flipper_loses_on_chain_and_the_honest_trainer_is_paid(settle_match, routed):
    job, ctx, honest, d = routed
    bad = Trainer(job, d / "cheater-chain", "cheater", behaviour=FlipsARoute(step=1, node=_topk_node(ctx), element=5))
    assert bad.train() != honest.final_claim()
    honest_paid_on_chain(settle_match, job, ctx, bad, honest, level=3)


class SequenceClassifier(torch.nn.Module):
    """Hugging Face's decoder classifier: the logits at each row's last non-pad token, found by
    an integer argmax and read by two index tensors (`logits[arange(B), last]`)."""

    def __init__(self):
        super().__init__()
        from transformers import LlamaConfig, LlamaForSequenceClassification
        torch.manual_seed(0)
        self.model = LlamaForSequenceClassification(LlamaConfig(
            vocab_size=V, hidden_size=D, intermediate_size=32, num_hidden_layers=1, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=16, num_labels=3, pad_token_id=0,
            attn_implementation="sdpa"))

    def forward(self, ids, labels):
        return self.model(input_ids=ids, labels=labels).loss


@pytest.mark.xdist_group("nn_family_job")
def test_a_hugging_face_sequence_classifier_is_a_job_whose_every_node_settles(tmp_path):
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(1, V, (2 * B, T), generator=g)
    ids[0, 3:] = 0  # padded rows: the last non-pad token is not the last position
    ids[5, 1:] = 0
    data = {"ids": ids, "labels": torch.randint(0, 3, (2 * B,), generator=g)}
    job = load(write_program_job(tmp_path / "job", SequenceClassifier(), data, list(data), steps=2, batch_size=B,
                                 fanout=2))
    ctx = Context(job)
    traced = Trainer(job, tmp_path / "t", "t").step_trace(0)
    assert [n.structure() for n in traced.nodes] == ctx.graph.structures
    assert {"aten.argmax.default", "aten.index.Tensor"} <= {n.op for n in traced.nodes}
    assert ctx.kernel_graph.unsettled == []
