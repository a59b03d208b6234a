"""Every malformed answer loses for the party that gave it, never an exception (issue #18).
A cheater's answers pass through a mangler that replaces one of them (hypothesis picks
which answer, and how: wrong type, truncated or extended bytes, lists of the wrong length,
proofs with a wrong index, chunk size, shape, dtype code or tree size) at every level of
the off-chain referee, in both seats. The referee must return a verdict, and the honest
trainer must win it."""
import dataclasses
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from offchain.dispute.party import InProcess, Party
from offchain.dispute.referee import dispute
from offchain.protocol.tensors import ElementProof
from offchain.trainer import Trainer
from offchain.trainer import adversaries as A

HOWS = ("none", "string", "int", "truncate", "extend", "flip", "index", "chunk", "shape", "code", "siblings",
        "nested")


def _proof(p: ElementProof, how: str, rng) -> ElementProof:
    change = {"truncate": {"chunk_bytes": p.chunk_bytes[:-1]},
              "extend": {"chunk_bytes": p.chunk_bytes + b"\0"},
              "flip": {"chunk_bytes": bytes([p.chunk_bytes[0] ^ 1]) + p.chunk_bytes[1:]} if p.chunk_bytes else {},
              "index": {"index": p.index + rng.choice((1, -1, 10**9))},
              "chunk": {"chunk": rng.choice((p.chunk + 1, p.chunk * 2, max(1, p.chunk // 2), 0))},
              "shape": {"shape": rng.choice((p.shape + (1,), p.shape[:-1], (10**12,), ("x",)))},
              "code": {"code": rng.choice((p.code + 1, 0, 99))},
              "siblings": {"siblings": rng.choice((p.siblings[:-1], p.siblings + (bytes(32),), (b"short",)))}}
    return dataclasses.replace(p, **change.get(how, {"chunk_bytes": b""}))


def mangle(x, how: str, rng):
    """A malformed copy of an answer (the trainer's own objects are never touched: it caches them)."""
    if how == "none":
        return None
    if how == "string":
        return "garbage"
    if how == "int":
        return 7
    if isinstance(x, ElementProof):
        return _proof(x, how, rng)
    if isinstance(x, (bytes, bytearray)):
        x = bytes(x)
        return {"truncate": x[:-1], "extend": x + b"\0",
                "flip": bytes([x[0] ^ 1]) + x[1:] if x else b"\0"}.get(how, x[: rng.randrange(len(x) + 1)])
    if isinstance(x, (list, tuple)):
        if not x:
            return [b""]
        if how == "truncate":
            return type(x)(x[:-1])
        if how == "extend":
            return type(x)([*x, x[-1]])
        if how == "nested":
            return [x]
        i = rng.randrange(len(x))
        return type(x)([*x[:i], mangle(x[i], how, rng), *x[i + 1:]])
    if isinstance(x, int) and not isinstance(x, bool):
        return {"truncate": x - 1, "extend": x + 1}.get(how, -x - 1)
    return None


class Mangled:
    """A trainer endpoint whose answer number `at` (counting every query) is malformed."""

    def __init__(self, trainer, at: int, how: str, seed: int):
        self._ep, self.at, self.how, self.rng, self.n = InProcess(trainer), at, how, random.Random(seed), 0

    def __getattr__(self, method):
        fn = getattr(self._ep, method)

        def call(*args):
            out = fn(*args)
            self.n += 1
            return mangle(out, self.how, self.rng) if self.n - 1 == self.at else out
        return call


@pytest.fixture(scope="module")
def cheat(job, tmp_path_factory):
    t = Trainer(job, tmp_path_factory.mktemp("mangled"), "cheater", behaviour=A.CorruptValue(step=2, node=9))
    t.train()
    return t


@pytest.fixture(scope="module")
def answers(ctx, honest, cheat):
    """How many answers the cheater gives in a clean dispute (it reaches level 5)."""
    ep = Mangled(cheat, -1, "none", 0)
    v = dispute(ctx, Party("honest", InProcess(honest), final=honest.final_claim()),
                Party("cheater", ep, final=cheat.final_claim()))
    assert v.level == 5 and v.winner == "honest", str(v)
    return ep.n


def _dispute(ctx, honest, cheat, at, how, seed, cheater_first):
    bad = Party("cheater", Mangled(cheat, at, how, seed), deadline_s=120, final=cheat.final_claim())
    good = Party("honest", InProcess(honest), deadline_s=120, final=honest.final_claim())
    return dispute(ctx, *((bad, good) if cheater_first else (good, bad)))


@pytest.mark.parametrize("how", HOWS)
def test_every_answer_malformed_every_way_loses_in_both_seats(ctx, honest, cheat, answers, how):
    """Exhaustive: each of the cheater's answers (levels 1-5), malformed this way."""
    levels = set()
    for at in range(answers):
        for first in (True, False):
            v = _dispute(ctx, honest, cheat, at, how, at, first)
            assert v.winner == "honest" and v.losers == ["cheater"], (at, first, str(v))
            levels.add(v.level)
    assert {2, 3, 4} <= levels, levels  # the malformed answers reached the deep levels


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_random_malformed_answers_lose(ctx, honest, cheat, answers, data):
    """Random: which answer, how, and the mangler's own random choices (which list item,
    which wrong chunk size or shape)."""
    v = _dispute(ctx, honest, cheat, data.draw(st.integers(0, answers - 1), label="answer"),
                 data.draw(st.sampled_from(HOWS), label="how"), data.draw(st.integers(0, 2**16), label="seed"),
                 data.draw(st.booleans(), label="cheater first"))
    assert v.winner == "honest" and v.losers == ["cheater"], str(v)
