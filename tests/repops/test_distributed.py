"""repops.distributed on plain torch.nn (a model we did not write for Verde): the fixed tree
against its recursive definition, DataParallel over gloo with 1, 2 and 4 processes against
an independently written single-process reference, bit for bit, and the failures a
multi-process run must name (another job on a rank, a lost rank)."""
import multiprocessing
import socket
import traceback

import pytest
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

import repops
from repops.distributed import DataParallel, DistributedError, TreeSum, block, cover, init, split
from repops.optim import AdamW

STEPS, M = 3, 4


def _reference_expr(lo, hi):
    """The spec's tree, written from its definition: the left child is the largest power of two."""
    if hi - lo == 1:
        return str(lo)
    p = 1
    while 2 * p < hi - lo:
        p *= 2
    return f"({_reference_expr(lo, lo + p)}+{_reference_expr(lo + p, hi)})"


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 48), st.data())
def test_any_world_size_dividing_m_sums_the_same_tree(m, data):
    world = data.draw(st.sampled_from([n for n in range(1, m + 1) if m % n == 0]))
    covers = [cover(m, *block(m, world, r)) for r in range(world)]
    assert [i for c in covers for a, b in c for i in range(a, b)] == list(range(m)), "the covers partition [0, M)"
    total = TreeSum(m, lambda a, b: f"({a}+{b})")
    for r in data.draw(st.permutations(range(world))):  # ranks' partials arrive in any order
        local = TreeSum(m, lambda a, b: f"({a}+{b})")
        for i in range(*block(m, world, r)):
            local.put(i, i + 1, str(i))
        assert [k for k, _ in local.items()] == covers[r], "a block reduces to exactly its cover"
        for (lo, hi), v in local.items():
            total.put(lo, hi, v)
    assert total.root() == _reference_expr(0, m)


def test_the_tree_is_balanced_for_powers_of_two_and_left_complete_otherwise():
    assert _reference_expr(0, 4) == "((0+1)+(2+3))"
    assert _reference_expr(0, 6) == "(((0+1)+(2+3))+(4+5))"
    assert split(0, 8) == 4 and split(0, 6) == 4 and split(4, 6) == 5
    with pytest.raises(DistributedError, match=r"micro_batches 6: a world size of 4 does not divide it; use one of \[1, 2, 3, 6\]"):
        block(6, 4, 0)
    sums = TreeSum(4, lambda a, b: a + b)
    sums.put(0, 1, 1)
    with pytest.raises(ValueError, match="not a node"):
        sums.put(1, 3, 2)
    with pytest.raises(ValueError, match="incomplete: 3 of 4"):
        sums.root()


# -- a plain torch.nn model, trained by DataParallel -------------------------------------------
def _model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3))


def _data(step):
    g = torch.Generator().manual_seed(step)
    return torch.randn(16, 6, generator=g), torch.randint(0, 3, (16,), generator=g)


def _loss_fn(model):
    return lambda x, y: F.cross_entropy(model(x), y)


def _train_dp(model, fingerprint=b"job"):
    dp = DataParallel(model, M, loss_fn=_loss_fn(model), fingerprint=fingerprint)
    opt = AdamW(model.parameters(), lr=1e-2)
    losses = []
    for s in range(STEPS):
        opt.zero_grad(set_to_none=True)
        losses.append(dp.backward(*_data(s)))
        with repops.deterministic():
            opt.step()
    return [p.detach().clone() for p in model.parameters()] + losses, (dp.bytes_sent, dp.bytes_received)


def _rank(rank, world, port, fingerprints, die_at, queue):
    try:
        init(rank, world, port, timeout_s=60)
        try:
            model = _model()
            if die_at is not None and rank == world - 1:
                import os
                os._exit(3)  # a rank that stops without a word
            out, sent = _train_dp(model, fingerprints[rank])
            queue.put((rank, "ok", [t.numpy() for t in out] if rank == 0 else None, sent))  # (no shared memory)
        finally:
            dist.destroy_process_group()
    except Exception as e:  # noqa: BLE001 - reported to the test
        queue.put((rank, type(e).__name__, str(e), traceback.format_exc()[-500:]))


def _spawn(world, fingerprints=None, die_at=None):
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    fingerprints = fingerprints or [b"job"] * world
    procs = [ctx.Process(target=_rank, args=(r, world, port, fingerprints, die_at, queue)) for r in range(world)]
    for p in procs:
        p.start()
    expected = world - (die_at is not None)
    results = {}
    for _ in range(expected):
        r, *rest = queue.get(timeout=240)
        results[r] = rest
    for p in procs:
        p.join(60)
    return results


def _bits(ts):
    return [t.reshape(-1).view(torch.int32) for t in ts]


def _explicit_reference():
    """Each micro-batch's gradient by loss.backward() on its own, the tree written out by
    hand, divided by 4: another code path to the same bits."""
    model = _model()
    opt = AdamW(model.parameters(), lr=1e-2)
    loss_fn, params = _loss_fn(model), list(model.parameters())
    losses, left_folds_differ = [], False
    for s in range(STEPS):
        x, y = _data(s)
        parts = []
        with repops.deterministic():
            for i in range(M):
                opt.zero_grad(set_to_none=True)
                loss = loss_fn(x[4 * i:4 * i + 4], y[4 * i:4 * i + 4])
                loss.backward()
                parts.append([loss.detach()] + [p.grad for p in params])
            tree = [((a + b) + (c + d)) / 4.0 for a, b, c, d in zip(*parts)]
            fold = [(((a + b) + c) + d) / 4.0 for a, b, c, d in zip(*parts)]
            left_folds_differ |= any(not torch.equal(u, v) for u, v in zip(_bits(tree), _bits(fold)))
            for p, g in zip(params, tree[1:]):
                p.grad = g
            opt.step()
        losses.append(tree[0])
    return [p.detach().clone() for p in params] + losses, left_folds_differ


@pytest.fixture(scope="module")
def reference():
    return _explicit_reference()


def test_one_process_gives_the_hand_written_tree(reference):
    want, left_folds_differ = reference
    got, sent = _train_dp(_model())
    assert all(torch.equal(a, b) for a, b in zip(_bits(got), _bits(want)))
    assert sent == (0, 0)
    assert left_folds_differ, "the data must tell the tree from a left fold, or this test proves nothing"


@pytest.mark.parametrize("world", [2, pytest.param(4, marks=pytest.mark.slow)])
def test_gloo_ranks_give_the_single_process_bits(reference, world):
    want, _ = reference
    results = _spawn(world)
    assert all(r[0] == "ok" for r in results.values()), results
    got = [torch.from_numpy(a) for a in results[0][1]]
    assert all(torch.equal(a, b) for a, b in zip(_bits(got), _bits(want)))
    n_values = sum(p.numel() for p in _model().parameters()) + 1
    n_params = len(list(_model().parameters()))
    # rank 0 holds a cover of one partial (M / world a power of two): it sends the other shards
    # of it and receives the others' partials of shard 0, then the finished shards (padded to
    # the largest, with the mask of the loss and each parameter) go both ways
    sizes = [n_values * (q + 1) // world - n_values * q // world for q in range(world)]
    row = max(sizes) + n_params + 1
    sent, received = n_values - sizes[0] + (world - 1) * row, (world - 1) * (sizes[0] + row)
    assert results[0][2] == (STEPS * 4 * sent, STEPS * 4 * received), \
        "each rank sends and receives one shard's partials and the finished shards, not whole covers"
    assert received < 2 * n_values + world * row, "~2x the gradient whatever the world size"


def test_a_rank_on_another_job_is_refused_by_every_rank():
    results = _spawn(2, fingerprints=[b"job-a", b"job-b"])
    for r in (0, 1):
        kind, msg, _ = results[r]
        assert kind == "DistributedError" and "is not running the same step" in msg and "job" in msg, results[r]


def test_a_lost_rank_is_an_error_on_the_others_not_a_hang():
    results = _spawn(2, die_at=0)
    kind, msg, _ = results[0]
    assert kind == "DistributedError" and "another rank has probably stopped" in msg, results[0]


def test_a_world_size_that_does_not_divide_the_micro_batches_is_refused(monkeypatch):
    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(dist, "get_world_size", lambda group=None: 3)
    monkeypatch.setattr(dist, "get_rank", lambda group=None: 0)
    with pytest.raises(DistributedError, match="micro_batches 4: a world size of 3 does not divide it"):
        DataParallel(_model(), M)
