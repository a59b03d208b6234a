"""Dropout from RepOps' counter-based generator (repops/random.py, docs/NUMERICS.md §12):
Philox4x32-10 is Random123's (its published answers), the mask is the same on every backend
and thread count, the arithmetic on it is torch's own dropout arithmetic bit for bit, keep
rates and independence are what a dropout layer needs, every torch entry point that drops
(nn.Dropout, F.dropout, SDPA's dropout_p, nn.MultiheadAttention, Hugging Face attention) goes
through it, and what it cannot do is refused with what to do."""
import copy

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import repops
from repops.reference import nn as N
from repops.reference import prims as P
from repops.random import NeedsDropoutKey

from model_zoo import Encoder

# Random123 kat_vectors, philox4x32 10: counter, key -> output
KAT = [((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
       ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
       ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
        (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1))]


def bits(t):
    return t.detach().contiguous().view(torch.int32)


def canonical(t):
    """NaNs as the spec's one NaN (torch keeps -inf * 0's sign)."""
    return torch.where(torch.isnan(t), torch.tensor(float("nan")), t)


@pytest.mark.parametrize("counter,key,want", KAT)
def test_philox_gives_random123s_known_answers(counter, key, want):
    assert [int(w) for w in P.philox4x32(counter, key)] == list(want)


def test_a_mask_element_is_word_0_of_its_own_counter():
    """The kernel's layout of the counter: (i mod 2^32, i div 2^32, step, 0) under (seed, stream)."""
    keep = P.philox(np.int32(6), np.int32(-3), np.int32(2), P.const(np.int32(0x7FFFFFFF), (50,), np.int32))
    for i in (0, 1, 17, 49):
        w = int(P.philox4x32((i, 0, 6, 0), (0xFFFFFFFD, 2))[0])
        assert keep[i] == (w >= 0x7FFFFFFF)


def _sample(p, step=1, seed=5, stream=0, shape=(200, 500)):
    x = np.ones(shape, np.float32)
    return N.dropout(x, np.float32(step), seed, stream, p)[1] != 0


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_the_keep_rate_is_one_minus_p(p):
    keep = _sample(p)
    n = keep.size
    sigma = (p * (1 - p) / n) ** 0.5
    assert abs(keep.mean() - (1 - p)) < 5 * sigma, keep.mean()


def test_steps_streams_and_seeds_draw_other_masks_and_the_same_key_the_same_one():
    base = _sample(0.5)
    assert np.array_equal(base, _sample(0.5))
    for other in (_sample(0.5, step=2), _sample(0.5, stream=1), _sample(0.5, seed=6)):
        agree = (other == base).mean()
        assert 0.48 < agree < 0.52, agree  # independent halves agree half the time


def test_dropout_is_torchs_dropout_arithmetic_on_the_mask():
    """y = x * noise, noise = keep / (1 - p) as torch computes it (a float32 mask divided in
    place), on specials too: x * 0 keeps NaN (canonical, as every spec NaN) and the sign of
    zero; the backward is g * noise."""
    p = 0.3
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 33, generator=g)
    x.view(-1)[:6] = torch.tensor([float("inf"), float("-inf"), float("nan"), -0.0, 1e-45, -3e38])
    x.requires_grad_()
    with repops.deterministic(), repops.dropout_key(9, 4):
        y = F.dropout(x, p)
        y.backward(torch.full_like(y, 0.75))
    keep = _sample(p, step=4, seed=9, shape=tuple(x.shape))
    noise = torch.from_numpy(keep).float()
    noise.div_(1 - p)
    assert torch.equal(bits(y), bits(canonical(x.detach() * noise)))
    assert torch.equal(bits(x.grad), bits(torch.full_like(y, 0.75) * noise))


def test_the_op_outside_repops_gives_the_same_bits():
    x = torch.randn(40, 7)
    step = torch.tensor(3.0)
    plain = torch.ops.repops.dropout(x, step, 21, 1, 0.2)
    with repops.deterministic():
        ours = torch.ops.repops.dropout(x, step, 21, 1, 0.2)
    assert all(torch.equal(bits(a), bits(b)) for a, b in zip(plain, ours))


class WithEverything(torch.nn.Module):
    """Every way torch drops: nn.Dropout, F.dropout, SDPA's dropout_p, nn.MultiheadAttention
    (inside a TransformerEncoderLayer), an LSTM's dropout between layers."""

    def __init__(self):
        super().__init__()
        self.enc = Encoder()
        for m in self.enc.modules():
            if isinstance(m, torch.nn.Dropout):
                m.p = 0.2
            if isinstance(m, torch.nn.MultiheadAttention):
                m.dropout = 0.2
        self.drop = torch.nn.Dropout(0.1)
        self.rnn = torch.nn.LSTM(3, 16, 2, dropout=0.3, batch_first=True)

    def forward(self, x, y):
        h = self.rnn(self.drop(self.enc(x)))[0]
        a = F.scaled_dot_product_attention(h[:, None], h[:, None], h[:, None], dropout_p=0.25, is_causal=True)[:, 0]
        return F.cross_entropy(F.dropout(a, 0.05).flatten(0, 1), y.flatten())


def _train(model, backend, steps=2, device="cpu"):
    g = torch.Generator().manual_seed(3)
    x, y = torch.randn(2, 6, 16, generator=g).to(device), torch.randint(0, 3, (2, 6), generator=g).to(device)
    model.to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for t in range(1, steps + 1):
        with repops.deterministic(backend), repops.dropout_key(77, t):
            opt.zero_grad()
            loss = model(x, y)
            loss.backward()
            opt.step()
        losses.append(loss.detach())
    return losses, [p.detach().clone() for p in model.parameters()]


def test_every_dropout_path_trains_the_same_bits_on_every_backend_and_thread_count(monkeypatch):
    torch.manual_seed(0)
    model = WithEverything()
    runs = []
    for backend, threads in (("cpu", "1"), ("cpu", "2"), ("cuda-emu", "2"), ("reference", "1")):
        monkeypatch.setenv("REPOPS_NUM_THREADS", threads)
        runs.append(_train(copy.deepcopy(model), backend))
    for losses, params in runs[1:]:
        assert all(torch.equal(bits(a), bits(b)) for a, b in zip(losses + params, runs[0][0] + runs[0][1]))
    eval_model = copy.deepcopy(model).eval()  # eval: no dropout, so another loss
    assert not torch.equal(_train(eval_model, "cpu", 1)[0][0], runs[0][0][0])


def test_a_step_records_one_repops_dropout_node_per_call():
    from offchain.protocol.trace import StepRecorder
    torch.manual_seed(0)
    model = WithEverything()
    g = torch.Generator().manual_seed(3)
    x, y = torch.randn(2, 6, 16, generator=g), torch.randint(0, 3, (2, 6), generator=g)
    step = torch.tensor(1.0)  # state, as a job's counter is: the trace names where each mask's step comes from
    rec = StepRecorder([*model.parameters(), step], [x, y], chunk=64)
    with repops.dropout_key(1, step), repops.deterministic(trace=rec):
        model(x, y).backward()
    ops = [n.op for n in rec.nodes]
    n_dropout = sum(isinstance(m, (torch.nn.Dropout, torch.nn.MultiheadAttention, torch.nn.LSTM))
                    for m in model.modules()) + 2  # SDPA, F.dropout
    assert ops.count("repops.dropout.default") == n_dropout, ops
    assert not any("bernoulli" in o or "native_dropout" in o for o in ops)


@pytest.mark.parametrize("call", [lambda x: F.dropout(x, 0.5), lambda x: torch.nn.Dropout(0.1)(x),
                                  lambda x: F.scaled_dot_product_attention(x, x, x, dropout_p=0.1)])
def test_dropout_without_a_key_is_refused_saying_how_to_give_one(call):
    x = torch.randn(2, 4, 8)
    with repops.deterministic(), pytest.raises(NeedsDropoutKey, match=r"repops\.dropout_key\(seed, step\)"):
        call(x)


def test_inactive_dropout_needs_no_key_and_feature_dropout_is_refused_naming_what_works():
    x = torch.randn(2, 3, 4, 4)
    with repops.deterministic():
        assert F.dropout(x, 0.5, training=False) is x and F.dropout(x, 0.0) is x
        with repops.dropout_key(1, 1), pytest.raises(repops.UnsupportedOpError, match="element dropout only"):
            F.dropout2d(x, 0.5)


def test_bad_keys_and_probabilities_are_clear_errors():
    x = torch.randn(4)
    with pytest.raises(ValueError, match="2\\^24"):
        with repops.dropout_key(1, 1 << 24):
            pass
    with pytest.raises(TypeError, match="0-d float32"):
        with repops.dropout_key(1, torch.tensor([1.0])):
            pass
    with repops.deterministic(), repops.dropout_key(1, 2):
        with pytest.raises(ValueError, match="between 0 and 1"):
            F.dropout(x, 1.5)
        dropped = F.dropout(x, 1.0)
    assert torch.equal(dropped, x * 0.0)  # torch's p = 1: all dropped
