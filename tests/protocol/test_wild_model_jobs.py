"""Three model shapes from the wild that the README's table promised (issue #39), written as their
authors write them in plain torch.nn: a CLIP-style two-tower model (L2-normalised embeddings, a
learned temperature, the symmetric cross entropy over the batch's similarity matrix), a graph
network (messages summed into nodes with index_add_, mean by in-degree) and a VAE (the
reparameterisation draw torch.randn_like, a Bernoulli decoder and the KL term). Each trains under
RepOps with the same bits on 1 and 2 threads and on the numpy spec, gives native torch's loss to
rounding (the VAE fed the same noise), and as a job its trace is its committed graph and every
node settles on chain."""
import pytest
import torch
import torch.nn.functional as F

import repops
from offchain.protocol.dataset import write_program_job
from offchain.trainer import Trainer
from playing import trained
from stepping import adamw_steps, bits

B, D, E = 6, 12, 8  # batch, input features, embedding width
NODES, EDGES = 10, 24


class TwoTowers(torch.nn.Module):
    """CLIP's contrastive head over two small encoders."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.text = torch.nn.Sequential(torch.nn.Embedding(30, D), torch.nn.Flatten(), torch.nn.Linear(4 * D, E))
        self.image = torch.nn.Sequential(torch.nn.Linear(D, 2 * E), torch.nn.GELU(), torch.nn.Linear(2 * E, E))
        self.logit_scale = torch.nn.Parameter(torch.tensor(2.6592))  # log(1 / 0.07), as CLIP initialises it

    def forward(self, tokens, pixels):
        t = F.normalize(self.text(tokens), dim=-1)
        i = F.normalize(self.image(pixels), dim=-1)
        logits = self.logit_scale.exp() * t @ i.t()
        labels = torch.arange(logits.shape[0])
        return (F.cross_entropy(logits, labels) + F.cross_entropy(logits.t(), labels)) / 2


class GraphNet(torch.nn.Module):
    """Two rounds of mean-aggregated message passing (GraphSAGE-style) and a node classifier;
    the graph (edge lists, in-degrees) is part of each sample."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.msg = torch.nn.ModuleList(torch.nn.Linear(D, D) for _ in range(2))
        self.upd = torch.nn.ModuleList(torch.nn.Linear(2 * D, D) for _ in range(2))
        self.out = torch.nn.Linear(D, 3)

    def forward(self, x, src, dst, degree, y):
        h = x[0]  # (one graph per sample; the batch is of size 1)
        for msg, upd in zip(self.msg, self.upd):
            m = torch.zeros_like(h).index_add_(0, dst[0], msg(h)[src[0]])
            h = torch.relu(upd(torch.cat([h, m / degree[0].clamp_min(1).unsqueeze(-1)], -1)))
        return F.cross_entropy(self.out(h), y[0])


class VAE(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.enc = torch.nn.Linear(D, 2 * 4)
        self.dec = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.SiLU(), torch.nn.Linear(16, D))

    def forward(self, x, noise=None):
        mu, logvar = self.enc(x).chunk(2, -1)
        eps = torch.randn_like(mu) if noise is None else noise
        z = mu + torch.exp(0.5 * logvar) * eps
        recon = F.binary_cross_entropy_with_logits(self.dec(z), x, reduction="sum") / x.shape[0]
        kl = -0.5 * torch.mean(torch.sum(1 + logvar - mu.pow(2) - logvar.exp(), -1))
        return recon + kl


def _data(name, n, seed=0):
    g = torch.Generator().manual_seed(seed)
    if name == "clip":
        return {"tokens": torch.randint(0, 30, (n, 4), generator=g), "pixels": torch.randn(n, D, generator=g)}
    if name == "gnn":
        src = torch.randint(0, NODES, (n, EDGES), generator=g)
        dst = torch.randint(0, NODES, (n, EDGES), generator=g)
        degree = torch.stack([torch.bincount(d, minlength=NODES).float() for d in dst])
        return {"x": torch.randn(n, NODES, D, generator=g), "src": src, "dst": dst, "degree": degree,
                "y": torch.randint(0, 3, (n, NODES), generator=g)}
    return {"x": torch.rand(n, D, generator=g)}


MODELS = {"clip": (TwoTowers, B), "gnn": (GraphNet, 1), "vae": (VAE, B)}


def _train(name, backend="cpu", threads=1, steps=2):
    make, bs = MODELS[name]
    data = _data(name, bs * 2)  # (the same data whatever the number of steps)
    batches = [[v[s * bs:(s + 1) * bs] for v in data.values()] for s in range(steps)]
    return adamw_steps(make(), batches, backend, threads, key=5)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_the_model_trains_with_the_same_bits_on_threads_and_the_spec(name):
    l1, p1 = _train(name, threads=1)
    l2, p2 = _train(name, threads=2)
    assert torch.equal(bits(l1), bits(l2)) and torch.equal(bits(p1), bits(p2))
    lr, pr = _train(name, "reference", steps=1)
    _, p_one = _train(name, steps=1)
    assert torch.equal(bits(l1[:1]), bits(lr)) and torch.equal(bits(p_one), bits(pr))
    assert not torch.equal(bits(p1), bits(p_one))  # (the second step moved the parameters)


@pytest.mark.parametrize("name", ["clip", "gnn"])
def test_the_first_loss_is_native_torchs_to_rounding(name):
    make, bs = MODELS[name]
    data = _data(name, bs)
    native, model = make()(*data.values()), make()
    with repops.deterministic():
        mine = model(*data.values())
    torch.testing.assert_close(mine, native.detach(), rtol=1e-5, atol=1e-6)


def test_the_vae_is_native_torchs_to_rounding_given_the_same_noise():
    """The draw itself is RepOps' (Philox, tests/repops/test_random_draws.py); given that noise the
    loss and every gradient are torch's to rounding."""
    x = _data("vae", B)["x"]
    noise = torch.randn(B, 4, generator=torch.Generator().manual_seed(3))
    native, mine = VAE(), VAE()
    native(x, noise).backward()
    with repops.deterministic():
        loss = mine(x, noise)
        loss.backward()
    torch.testing.assert_close(loss, native(x, noise).detach(), rtol=1e-5, atol=1e-6)
    for a, b in zip(mine.parameters(), native.parameters()):
        torch.testing.assert_close(a.grad, b.grad, rtol=1e-4, atol=1e-6)


@pytest.mark.xdist_group("wild_model_jobs")
@pytest.mark.parametrize("name", sorted(MODELS))
def test_as_a_job_its_trace_is_its_graph_and_every_node_settles(name, tmp_path):
    make, bs = MODELS[name]
    data = _data(name, 2 * bs, seed=1)
    job, ctx, honest = trained(write_program_job(tmp_path / "job", make(), data, list(data), steps=2, batch_size=bs,
                                                 fanout=2, seed=7), tmp_path)
    assert [n.structure() for n in honest.step_trace(1).nodes] == ctx.graph.structures
    assert ctx.kernel_graph.unsettled == []
    ops = {n.op for n in honest.step_trace(1).nodes}
    assert {"clip": "aten.linalg_vector_norm.default", "gnn": "aten.index_add_.default",
            "vae": "repops.dropout.default"}[name] in ops, sorted(ops)
    assert Trainer(job, tmp_path / "again", "again").train() == honest.final_claim()
