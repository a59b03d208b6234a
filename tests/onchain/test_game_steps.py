"""The on-chain game so far (level 1 and the opening of level 2) between the trainer
library's honest trainer and adversaries, settled through the registry: the honest one is
paid, the cheater's stake goes to it, the books balance."""
import pytest
import torch

from offchain import adversaries as A
from offchain.chain.client import TransactionReverted
from offchain.chain.verde import PHASE_DONE, PHASE_NODES, Verde
from offchain.dispute.context import Context
from offchain.protocol.dataset import write_job
from offchain.protocol.job import load
from offchain.trainer import Trainer

PAY, STAKE = 3 * 10**18, 10**18


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    d = tmp_path_factory.mktemp("onchain")
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 16, generator=g)
    data = {"x": x, "y": (x @ torch.randn(16, 10, generator=g)).argmax(1)}
    job = load(write_job(d / "job", "mlp", {"d_in": 16, "d_hidden": 32, "n_classes": 10}, data, steps=6,
                         batch_size=8, fanout=3, chunk=64))
    honest = Trainer(job, d / "honest", "honest")
    honest.train()
    return job, Context(job), honest, d


def _run(chain, setup, behaviour):
    job, ctx, honest, d = setup
    bad = Trainer(job, d / f"bad-{behaviour.name}-{chain.backend}", "cheater", behaviour=behaviour)
    bad.train()
    v = Verde.deploy(chain)
    client, ta, tb = chain.accounts[1], chain.accounts[2], chain.accounts[3]
    jid = v.post(job, ctx, PAY, STAKE, client=client)
    salts = {}
    for acct, t in ((ta, honest), (tb, bad)):
        salts[acct.address] = v.join_and_commit(jid, job.job_id, t.final_claim(), STAKE, acct)
    chain.advance(1300)
    for acct, t in ((ta, honest), (tb, bad)):
        v.reveal(jid, t.final_claim(), salts[acct.address], acct)
    chain.advance(600)
    v.settle(jid)
    m = v.open_match(jid, ta.address, tb.address)
    for _ in range(40):
        st = v.match_state(m)
        if st["phase"] in (PHASE_DONE, PHASE_NODES):
            break
        moved = [v.move(m, t, acct) for acct, t in ((ta, honest), (tb, bad))]
        if not all(moved):
            chain.advance(3601)
            chain.transact(v.game.functions.timeout(m))
    return v, jid, m, ta, tb


@pytest.mark.parametrize("behaviour", [A.StopsEarly(steps_done=2), A.InconsistentOpening(), A.Silent(answers=1)],
                         ids=lambda b: b.name)
def test_honest_wins_on_chain_and_is_paid(chain, setup, behaviour):
    v, jid, m, ta, tb = _run(chain, setup, behaviour)
    assert v.match_state(m)["phase"] == PHASE_DONE
    assert v.owed(ta.address) == PAY + 2 * STAKE and v.owed(tb.address) == 0
    assert chain.w3.eth.get_balance(v.registry.address) == (
        v.chain.call(v.registry.functions.escrow()) + v.chain.call(v.registry.functions.totalOwed()))
    before = chain.w3.eth.get_balance(ta.address)
    chain.transact(v.registry.functions.withdraw(), sender=ta)
    assert chain.w3.eth.get_balance(ta.address) > before


def test_level_1_reaches_the_disputed_step_for_a_value_cheater(chain, setup):
    v, jid, m, ta, tb = _run(chain, setup, A.CorruptValue(step=3, node=10))
    st = v.match_state(m)
    assert st["phase"] == PHASE_NODES and st["lo"] == 3  # the rest of level 2 and below: the next issue


def test_only_the_parties_move(chain, setup):
    v, jid, m, ta, tb = _run(chain, setup, A.CorruptValue(step=3, node=10))
    with pytest.raises(TransactionReverted) as e:
        chain.transact(v.game.functions.postClaims(m, []), sender=chain.accounts[5])
    assert e.value.error in ("WrongPhase", "NotAParty")
