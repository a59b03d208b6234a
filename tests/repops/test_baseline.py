"""The rounding-log baseline (issue #20; repops.baseline, offchain/trainer/rounding_log.py):
its rounding decisions against first principles, its encoding, and the point of it: two
runs whose float64 differs (another summation order, thread count, batch split of the
weight gradients, and hardware that drifts further) give bitwise the same float32 state
after one replays the other's logs, over 8 steps of both models, and differ without them."""
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from repops.baseline import DOWN, IGNORE, UP, LogMismatch, RoundingLog, apply, decide, pack, unpack
from offchain.protocol.corpus import text_job
from offchain.protocol.jobfile import load
from offchain.trainer.rounding_log import train_logged

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "protocol"))
from small_job import write_small_job  # noqa: E402

f64 = st.floats(allow_nan=False, allow_infinity=False, min_value=-1e30, max_value=1e30)


@given(st.lists(f64, min_size=1, max_size=40), st.sampled_from([0.0, 0.25, 0.4, 0.49]))
@settings(max_examples=300, deadline=None)
def test_decide_logs_a_direction_exactly_where_the_value_is_far_from_its_nearest_float32(xs, tau):
    x = np.array(xs)
    r, codes = decide(x, tau)
    assert np.array_equal(r.view(np.uint32), torch.tensor(x).to(torch.float32).numpy().view(np.uint32))  # RNE
    for xi, ri, c in zip(x, r, codes):  # exact rational arithmetic, not the implementation's floats
        above = np.nextafter(np.abs(ri), np.float32(np.inf))
        ulp = Fraction(float(above)) - Fraction(float(np.abs(ri)))
        dist = abs(Fraction(float(xi)) - Fraction(float(ri)))
        if dist > Fraction(tau) * ulp:
            assert c == (UP if Fraction(float(ri)) > Fraction(float(xi)) else DOWN)
        else:
            assert c == IGNORE


@given(st.lists(f64, min_size=1, max_size=40), st.lists(st.sampled_from([DOWN, IGNORE, UP]), min_size=40,
                                                                        max_size=40))
@settings(max_examples=300, deadline=None)
def test_apply_rounds_up_to_the_least_float32_above_and_down_to_the_greatest_below(xs, cs):
    x, codes = np.array(xs), np.array(cs[:len(xs)], np.uint8)
    r, moved = apply(x, codes)
    r = r.astype(np.float64)
    nearest = x.astype(np.float32).astype(np.float64)
    assert moved == int(np.count_nonzero(r != nearest))  # the corrections it reports are the ones it made
    for xi, ri, ni, c in zip(x, r, nearest, codes):
        if c == UP:
            assert ri >= xi and float(np.nextafter(np.float32(ri), np.float32(-np.inf))) < xi
        elif c == DOWN:
            assert ri <= xi and float(np.nextafter(np.float32(ri), np.float32(np.inf))) > xi
        else:
            assert ri == ni


def test_a_replayer_within_the_tolerance_gets_the_recorder_s_bits():
    """x' = x(1 + e) with |e| well under min(tau, 1/2 - tau) float32 spacings: the log makes
    every rounding the same; to nearest, the ones near a boundary differ."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal(200_000) * 10.0 ** rng.integers(-20, 20, 200_000)
    r, codes = decide(x, 0.25)
    other = x * (1 + rng.uniform(-1, 1, x.shape) * 2.0 ** -27)  # 1/16 of a float32 spacing, at most
    assert np.array_equal(apply(other, codes)[0].view(np.uint32), r.view(np.uint32))
    assert not np.array_equal(other.astype(np.float32).view(np.uint32), r.view(np.uint32))


@given(st.lists(st.sampled_from([0, 1, 2]), max_size=200))
def test_five_codes_pack_into_a_byte_and_unpack(codes):
    c = np.array(codes, np.uint8)
    data = pack(c)
    assert len(data) == -(-len(c) // 5)
    assert np.array_equal(unpack(data, len(c)), c)


def test_pack_refuses_what_is_not_a_log():
    with pytest.raises(ValueError):
        pack(np.array([3], np.uint8))
    with pytest.raises(ValueError):
        unpack(b"\xff", 5)
    with pytest.raises(ValueError):
        RoundingLog("replay")


@pytest.fixture(scope="module", params=["mlp", "llama"])
def job(request, tmp_path_factory):
    d = tmp_path_factory.mktemp(f"baseline-{request.param}")
    if request.param == "mlp":
        return load(write_small_job(d / "job"))
    return load(text_job(d / "job", 20, batch_size=2))


def _bits(state: dict) -> dict:
    return {n: t.contiguous().view(torch.int32) for n, t in state.items()}


def _same(a: dict, b: dict) -> bool:
    return all(torch.equal(x, y) for x, y in zip(_bits(a).values(), _bits(b).values()))


def test_replaying_the_logs_gives_the_same_float32_state_on_another_machine_and_not_without(job):
    """8 steps. The other machine: split-K matrix products and sums (for weight gradients a
    different batch split), 2 threads instead of 1, and float64 results that drift by up to
    1e-9 relative (beyond any reordering: a GPU's). With the recorder's logs, its state is
    the recorder's bit for bit; rounding to nearest instead, it is not."""
    steps = 8
    rec = train_logged(job, "record", steps=steps, threads=1)
    other = {"split": 3, "threads": 2, "drift": 1e-9}
    rep = train_logged(job, "replay", rec.logs, steps=steps, **other)
    assert _same(rep.state, rec.state) and rep.corrections > 0
    assert rep.roots == rec.roots and len(set(rec.roots)) == steps  # committed per step
    free = train_logged(job, "nearest", steps=steps, **other)
    differ = sum(int((a != b).sum()) for a, b in zip(_bits(free.state).values(), _bits(rec.state).values()))
    assert differ > 0, "without the logs the other machine's state should differ"


def test_reordering_alone_is_followed_and_a_drift_beyond_tau_is_not(job):
    """Only a float64 reordering (split-K, threads): the replay is still exact. A machine that
    drifts by more than the log tolerates (1/4 of a float32 spacing) diverges even with the
    logs: the threshold's meaning."""
    rec = train_logged(job, "record", steps=3)
    assert _same(train_logged(job, "replay", rec.logs, steps=3, split=4, threads=2).state, rec.state)
    far = train_logged(job, "replay", rec.logs, steps=3, drift=2e-7)
    assert not _same(far.state, rec.state)


def test_a_log_that_is_not_the_step_s_is_refused(job):
    """Every step runs the same ops, so a log's shape is checked entry by entry: one entry
    short, or an entry of another op or size, stops the replay with LogMismatch."""
    from dataclasses import replace
    rec = train_logged(job, "record", steps=1)
    short = replace(rec.logs[0], entries=rec.logs[0].entries[:-1])
    with pytest.raises(LogMismatch):
        train_logged(job, "replay", [short], steps=1)
    op, codes = rec.logs[0].entries[0]
    wrong = replace(rec.logs[0], entries=[(op, codes[:-1])] + rec.logs[0].entries[1:])
    with pytest.raises(LogMismatch, match="elements"):
        train_logged(job, "replay", [wrong], steps=1)
