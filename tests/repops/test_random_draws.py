"""torch's random-number calls inside repops.dropout_key (repops/draws.py, docs/NUMERICS.md §12):
rand is 24 of dropout's Philox bits per element, in the call's own stream, checked against
Random123's word computed here from the spec alone; randn, bernoulli, randint, uniform_ and
normal_ are their stated transforms of it, multinomial (with and without replacement) and
randperm too, each with its law checked; the same bits on every thread count and backend;
outside a key, the one refusal. A Hugging Face layerdrop model (OPT) trains under RepOps with
the same bits on 1 and 2 threads."""
import copy

import numpy as np
import pytest
import torch

import repops
from repops.draws import BITS, TWO_PI, NeedsRandomKey
from repops.errors import DTypeError, UnsupportedOpError
from repops.random import dropout_key
from repops.reference.prims import philox4x32


def bits(t):
    return t.view(torch.int32)


def reference_uniform(n, seed, step, stream):
    """u[i] = the top bits of Philox word 0 at counters 24 i .. 24 i + 23, read as a 24-bit fraction."""
    i = np.arange(n * BITS, dtype=np.uint64)
    word = philox4x32((i & np.uint64(0xFFFFFFFF), i >> np.uint64(32), step, 0), (seed, stream))[0]
    top = (word >> np.uint64(31)).astype(np.int64).reshape(n, BITS)
    return torch.from_numpy(((top << np.arange(BITS - 1, -1, -1)).sum(1) / 2.0 ** BITS).astype(np.float32))


def test_rand_is_24_philox_bits_per_element_in_its_call_s_stream():
    with repops.deterministic(), dropout_key(9, 4):
        a = torch.rand(3, 5)
        torch.nn.functional.dropout(torch.ones(4), 0.5)  # stream 1: dropout and draws count together
        b = torch.rand([7])
    assert torch.equal(bits(a.reshape(-1)), bits(reference_uniform(15, 9, 4, 0)))
    assert torch.equal(bits(b), bits(reference_uniform(7, 9, 4, 2)))
    assert a.min() >= 0 and a.max() < 1


def test_randn_is_box_muller_of_one_uniform_draw():
    n = 4096
    with repops.deterministic(), dropout_key(5, 2):
        z = torch.randn(n)
        u = reference_uniform(2 * n, 5, 2, 0).reshape(2, n)
        want = torch.sqrt(torch.log(1.0 - u[0]) * -2.0) * torch.cos(u[1] * TWO_PI)
    assert torch.equal(bits(z), bits(want))
    assert abs(z.mean().item()) < 0.05 and abs(z.std().item() - 1) < 0.05 and torch.isfinite(z).all()


def test_the_other_draws_are_their_stated_transforms():
    p = torch.linspace(0, 1, 64)
    x = torch.empty(2, 32)
    with repops.deterministic(), dropout_key(1, 1):
        b = torch.bernoulli(p)                 # stream 0
        r = torch.randint(3, 10, (4000,))      # 1
        x.uniform_(-2.0, 6.0)                  # 2
        w = torch.empty(64).normal_(3.0, 0.5)  # 3
        c = torch.empty(2000).bernoulli_(0.25)  # 4
    assert torch.equal(b, (reference_uniform(64, 1, 1, 0) < p).float())
    assert r.dtype == torch.int64 and r.min() == 3 and r.max() == 9 and len(r.unique()) == 7
    assert torch.equal(r, (reference_uniform(4000, 1, 1, 1).double() * 2 ** 24).long() * 7 // 2 ** 24 + 3)
    assert torch.equal(bits(x.reshape(-1)), bits(reference_uniform(64, 1, 1, 2) * 8.0 + -2.0))
    assert 2.0 < w.mean() < 4.0 and 0.2 < w.std() < 0.8
    assert 0.2 < c.mean() < 0.3 and set(c.unique().tolist()) <= {0.0, 1.0}


def test_torch_s_call_forms_are_taken():
    p, m = torch.full((3,), 0.5), torch.zeros(4)
    with repops.deterministic(), dropout_key(1, 1):
        got = [p.bernoulli(), p.bernoulli(0.9), torch.normal(0.0, 1.0, (3,)), torch.normal(m, 1.0),
               torch.normal(m, torch.ones(4)), torch.rand_like(p), torch.randn(size=(2, 3)), torch.rand(torch.Size([3])),
               torch.randint(5, (3,)), torch.randint(high=4, size=(2,)), torch.randint(2, 4, size=(2,)),
               torch.randint(low=2, high=4, size=(2,)), torch.rand([])]
    assert [tuple(t.shape) for t in got] == [(3,), (3,), (3,), (4,), (4,), (3,), (2, 3), (3,), (3,), (2,), (2,), (2,), ()]
    assert all(t.dtype == torch.int64 for t in got[8:12]) and all(2 <= v < 4 for t in got[10:12] for v in t.tolist())


def test_multinomial_is_the_inverse_cdf_in_cumsum_s_order():
    p = torch.tensor([[0.1, 0.0, 0.6, 0.3], [0.25, 0.25, 0.25, 0.25], [0.0, 0.0, 1.0, 0.0]])
    with repops.deterministic(), dropout_key(2, 7):
        got = torch.multinomial(p, 3000, replacement=True)
        one = torch.tensor([0.5, 0.5]).multinomial(1)
    c = np.cumsum(p.numpy(), axis=1, dtype=np.float32)
    t = (reference_uniform(3 * 3000, 2, 7, 0).numpy().reshape(3, 3000) * c[:, -1:]).astype(np.float32)
    assert torch.equal(got, torch.from_numpy((c[:, None, :] <= t[:, :, None]).sum(-1)))
    assert (got[0] != 1).all() and (got[2] == 2).all() and abs((got[0] == 2).float().mean() - 0.6) < 0.05
    assert one.shape == (1,) and one.dtype == torch.int64
    with repops.deterministic(), dropout_key(2, 7), pytest.raises(UnsupportedOpError, match="without replacement"):
        torch.multinomial(p, 5)  # (torch: cannot sample n_sample > prob_dist.size(-1) samples without replacement)


def test_multinomial_without_replacement_is_the_top_keys_log_u_over_p():
    p = torch.tensor([[0.1, 0.0, 0.6, 0.3, 0.0], [1.0, 2.0, 3.0, 4.0, 5.0]])
    with repops.deterministic(), dropout_key(3, 2):
        got = torch.multinomial(p, 3)
    u = reference_uniform(10, 3, 2, 0).reshape(2, 5)
    want = torch.topk(torch.log(u) / p, 3).indices  # (torch's own log/div/topk: the same IEEE answers here)
    assert torch.equal(got, want)
    assert all(len(set(r)) == 3 for r in got.tolist()) and set(got[0].tolist()) == {0, 2, 3}
    # the law: draw one at a time without putting back; the first of 20,000 rows of [1, 2, 3, 4] is c w.p. c / 10
    # and the pair (3, 2) has probability 4/10 * 3/6 = 0.2
    q = torch.tensor([1.0, 2.0, 3.0, 4.0]).expand(20000, 4)
    with repops.deterministic(), dropout_key(8, 1):
        many = torch.multinomial(q, 2)
    first = torch.bincount(many[:, 0], minlength=4).float() / 20000
    assert (first - torch.tensor([0.1, 0.2, 0.3, 0.4])).abs().max() < 0.015, first
    assert abs(((many[:, 0] == 3) & (many[:, 1] == 2)).float().mean() - 0.2) < 0.015


def test_multinomial_s_value_refusals_are_fault_claims():
    """torch refuses a negative, NaN or all-zero row and too few categories of positive
    probability; RepOps' definition says so as a fault (the step's claim), never an answer."""
    for bad, match in ((torch.tensor([0.5, -0.1, 0.6]), "negative"), (torch.tensor([0.5, float("nan"), 0.1]), "NaN"),
                       (torch.tensor([0.0, 0.0, 0.0]), "sums to 0"), (torch.tensor([0.5, 0.0, 0.0]), "fewer categories")):
        with pytest.raises(repops.Fault, match=match):
            with repops.deterministic(), dropout_key(1, 1):
                torch.multinomial(bad, 2)


def test_randperm_is_a_stable_argsort_of_one_draw_of_two_24_bit_keys():
    with repops.deterministic(), dropout_key(6, 3):
        p = torch.randperm(1000)
        q = torch.randperm(5, dtype=torch.int32)
        e = torch.randperm(0)
    hi, lo = (reference_uniform(2000, 6, 3, 0).double() * 2 ** 24).long().reshape(2, 1000)  # one draw [2, n]
    assert p.dtype == torch.int64 and torch.equal(p, torch.argsort(hi * 2 ** 24 + lo, stable=True))
    assert sorted(p.tolist()) == list(range(1000)) and not torch.equal(p, torch.arange(1000))
    assert q.dtype == torch.int32 and sorted(q.tolist()) == list(range(5)) and e.shape == (0,)
    # uniform: each of the 3! orders about 1/6 of 4,000 calls of randperm(3) (each call its own stream)
    with repops.deterministic(), dropout_key(11, 1):
        orders = [tuple(torch.randperm(3).tolist()) for _ in range(4000)]
    counts = {o: orders.count(o) for o in set(orders)}
    assert len(counts) == 6 and all(abs(c / 4000 - 1 / 6) < 0.025 for c in counts.values()), counts


def test_a_model_with_draws_trains_the_same_bits_on_every_thread_count_and_backend(monkeypatch):
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(6, 6), torch.nn.Tanh(), torch.nn.Linear(6, 3))
    x, y = torch.randn(5, 6), torch.tensor([0, 1, 2, 0, 1])

    def train(backend, threads):
        monkeypatch.setenv("REPOPS_NUM_THREADS", threads)
        m = copy.deepcopy(net)
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        for t in range(1, 3):
            with repops.deterministic(backend), dropout_key(4, t):
                opt.zero_grad()
                h = m(x[:, torch.randperm(6)] + torch.randn_like(x) * 0.1) * torch.bernoulli(torch.full((3,), 0.8))
                k = torch.multinomial(torch.softmax(h.detach(), -1), 2)[:, 1]  # without replacement
                (torch.nn.functional.cross_entropy(h, y) + torch.nn.functional.cross_entropy(h, k)).backward()
                opt.step()
        return [p.detach().clone() for p in m.parameters()]
    runs = [train(*a) for a in (("cpu", "1"), ("cpu", "2"), ("cuda-emu", "2"), ("reference", "1"))]
    for run in runs[1:]:
        assert all(torch.equal(bits(a), bits(b)) for a, b in zip(run, runs[0]))


@pytest.mark.parametrize("call", [
    lambda: torch.rand(3), lambda: torch.randn_like(torch.ones(2)), lambda: torch.ones(3).uniform_(),
    lambda: torch.bernoulli(torch.full((2,), 0.5)), lambda: torch.randint(0, 4, (2,)),
    lambda: torch.randperm(4), lambda: torch.multinomial(torch.ones(3), 2), lambda: torch.ops.aten.rand.default([3])])
def test_outside_a_key_a_draw_is_refused_with_the_one_message(call):
    with repops.deterministic(), pytest.raises(NeedsRandomKey, match=r"repops\.dropout_key\(seed, step\)"):
        call()


def test_a_generator_or_another_dtype_is_refused_inside_a_key():
    with repops.deterministic(), dropout_key(0, 1):
        with pytest.raises(UnsupportedOpError, match="generator"):
            torch.rand(2, generator=torch.Generator())
        with pytest.raises(DTypeError, match="float32 only"):
            torch.rand(2, dtype=torch.float64)


def test_outside_repops_the_calls_are_torch_s():
    torch.manual_seed(3)
    a = torch.rand(4)
    torch.manual_seed(3)
    with dropout_key(1, 1):
        assert torch.equal(torch.rand(4), a)


def test_hugging_face_opt_with_layerdrop_trains_the_same_bits_on_one_and_two_threads(monkeypatch):
    """OPT's decoder skips a layer when torch.rand([]) < layerdrop: the draw is RepOps'."""
    import transformers as T
    torch.manual_seed(0)
    cfg = T.OPTConfig(vocab_size=64, hidden_size=16, num_hidden_layers=4, ffn_dim=32, num_attention_heads=2,
                      max_position_embeddings=32, word_embed_proj_dim=16, layerdrop=0.5, dropout=0.1)
    model = T.OPTForCausalLM(cfg).float()
    ids = torch.randint(0, 64, (2, 8), generator=torch.Generator().manual_seed(1))
    pos = torch.arange(8).expand(2, -1)  # (OPT counts positions by a float cumsum otherwise)

    def train(threads):
        monkeypatch.setenv("REPOPS_NUM_THREADS", threads)
        m = copy.deepcopy(model)
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        losses = []
        for t in range(1, 4):
            with repops.deterministic(), dropout_key(5, t):
                opt.zero_grad()
                loss = m(input_ids=ids, labels=ids, position_ids=pos).loss
                loss.backward()
                opt.step()
            losses.append(loss.detach())
        return losses + [p.detach().clone() for p in m.parameters()]
    one, two = train("1"), train("2")
    assert all(torch.equal(bits(a), bits(b)) for a, b in zip(one, two))
