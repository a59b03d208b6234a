"""A dispute does not know the world size: against a trainer that trained an M = 2 job on
two gloo processes, the on-chain game reaches the same decision, at the same primitive, as
against one that trained it in one process, and the honest one is paid."""
import pytest

from offchain.dispute.context import Context
from offchain.protocol.dataset import write_job
from offchain.protocol.jobfile import load
from offchain.trainer import Trainer
from offchain.trainer import adversaries as A
from small_job import FANOUT, STEPS, mlp_data


@pytest.fixture(scope="module")
def m2(tmp_path_factory):
    d = tmp_path_factory.mktemp("m2")
    job = load(write_job(d / "job", "mlp", {"d_in": 16, "d_hidden": 32, "n_classes": 10}, mlp_data(), steps=STEPS,
                         batch_size=8, fanout=FANOUT, chunk=64, micro_batches=2))
    one, two = Trainer(job, d / "one", "honest"), Trainer(job, d / "two", "honest", world_size=2)
    assert one.train() == two.train()
    return job, Context(job), one, two, d


# the step's new nodes: the sum of two micro-batch gradients of the first parameter, its mean
# over M (occurrence 0 of add and div is the loss's: it reaches no state)
@pytest.mark.parametrize("op, occurrence", [("aten.add.Tensor", 1), ("aten.div.Tensor", 1)])
def test_the_game_ends_at_the_same_primitive_whatever_the_honest_world_size(settle_match, m2, op, occurrence):
    from offchain.protocol.trace import decode_structure
    job, ctx, one, two, d = m2
    node = [j for j, s in enumerate(ctx.graph.structures) if decode_structure(s)[0] == op][occurrence]
    cheat = Trainer(job, d / f"cheat-{op}", "cheater", behaviour=A.CorruptValue(step=3, node=node, element=3,
                                                                                    ulps=1 << 12))
    cheat.train()
    decisions = []
    for honest in (one, two):
        r = settle_match(job, ctx, honest, cheat, max_rounds=120)
        assert r.decision["winner"] == r.first and r.decision["level"] == 5, r.decision
        assert r.paid_and_slashed(r.first, r.second)
        decisions.append((r.decision["level"], r.decision["reason"], r.v.match_state(r.m)))  # (the step, the clocks' use)
    assert decisions[0] == decisions[1]
