"""The on-chain game (levels 1 and 2) between the trainer library's honest trainer and the
adversaries of offchain.adversaries, settled through the registry: the honest one is paid,
the cheater's stake goes to it, the books balance. Value cheaters (Case 3) reach the
operator phase, where levels 3-5 are the next step."""
import sys
from pathlib import Path

import pytest

from offchain import adversaries as A
from offchain.chain.client import TransactionReverted
from offchain.chain.verde import PHASE_DONE, PHASE_OPERATOR, Verde
from offchain.dispute.context import Context
from offchain.protocol.job import load
from offchain.trainer import Trainer

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "protocol"))
from small_job import write_small_job  # noqa: E402  (the protocol tests' job)

PAY, STAKE = 3 * 10**18, 10**18


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    d = tmp_path_factory.mktemp("onchain")
    job = load(write_small_job(d / "job"))
    honest = Trainer(job, d / "honest", "honest")
    honest.train()
    return job, Context(job), honest, d


def _run(chain, setup, behaviour, honest_first=True):
    job, ctx, honest, d = setup
    bad = Trainer(job, d / f"bad-{behaviour.name}-{chain.backend}-{honest_first}", "cheater", behaviour=behaviour)
    bad.train()
    v = Verde.deploy(chain)
    client, hon_acct, bad_acct = chain.accounts[1], chain.accounts[2], chain.accounts[3]
    seats = [(hon_acct, honest), (bad_acct, bad)]
    if not honest_first:
        seats.reverse()
    jid, _ = v.deliver(job, ctx, seats, PAY, STAKE, client)
    m = v.open_match(jid, seats[0][0].address, seats[1][0].address)
    v.play(m, seats, ctx, until=(PHASE_DONE, PHASE_OPERATOR))
    return v, jid, m, hon_acct, bad_acct


LEVEL2 = [A.StopsEarly(steps_done=2), A.InconsistentOpening(), A.Silent(answers=1), A.Lazy(start=3),
          A.PoisonedData(step=3), A.WrongHyperParameter(), A.TamperedInput(step=2), A.ForgedCheckpoint(step=2),
          A.ExtraOp(step=5)]


@pytest.mark.parametrize("honest_first", [True, False], ids=["honest-first", "honest-second"])
@pytest.mark.parametrize("behaviour", LEVEL2, ids=lambda b: b.name)
def test_honest_wins_on_chain_and_is_paid(chain, setup, behaviour, honest_first):
    if chain.backend == "anvil" and not honest_first:
        pytest.skip("seat order is covered on the embedded chain; Anvil runs each adversary once")
    v, jid, m, hon, bad = _run(chain, setup, behaviour, honest_first)
    assert v.match_state(m)["phase"] == PHASE_DONE
    assert v.owed(hon.address) == PAY + 2 * STAKE and v.owed(bad.address) == 0
    assert chain.w3.eth.get_balance(v.registry.address) == (
        v.chain.call(v.registry.functions.escrow()) + v.chain.call(v.registry.functions.totalOwed()))
    before = chain.w3.eth.get_balance(hon.address)
    chain.transact(v.registry.functions.withdraw(), sender=hon)
    assert chain.w3.eth.get_balance(hon.address) > before


def test_a_value_cheater_is_narrowed_to_one_operator(chain, setup):
    v, jid, m, hon, bad = _run(chain, setup, A.CorruptValue(step=3, node=10))
    assert v.match_state(m)["phase"] == PHASE_OPERATOR and v.match_state(m)["lo"] == 3
    assert tuple(v.chain.call(v.game.functions.descent(m))) == (0, 10)


def test_only_the_parties_move_once_per_round_and_nobody_times_out_early(chain, setup):
    job, ctx, honest, d = setup
    v = Verde.deploy(chain)
    seats = [(chain.accounts[2], honest), (chain.accounts[3], Trainer(job, d / f"lazy-{chain.backend}", "lazy",
                                                                      behaviour=A.Lazy(start=3)))]
    seats[1][1].train()
    jid, _ = v.deliver(job, ctx, seats, PAY, STAKE, chain.accounts[1])
    m = v.open_match(jid, seats[0][0].address, seats[1][0].address)
    points = list(v.chain.call(v.game.functions.roundPoints(m)))
    claims = honest.claim_at(points)
    with pytest.raises(TransactionReverted) as e:
        chain.transact(v.game.functions.postClaims(m, claims), sender=chain.accounts[5])
    assert e.value.error == "NotAParty"
    chain.transact(v.game.functions.postClaims(m, claims), sender=seats[0][0])
    with pytest.raises(TransactionReverted) as e:
        chain.transact(v.game.functions.postClaims(m, claims), sender=seats[0][0])
    assert e.value.error == "AlreadyMoved"
    with pytest.raises(TransactionReverted) as e:
        chain.transact(v.game.functions.timeout(m))
    assert e.value.error == "NobodyTimedOut"


def test_a_value_dispute_waits_at_the_operator_and_cannot_be_timed_out(chain, setup):
    v, jid, m, hon, bad = _run(chain, setup, A.CorruptValue(step=3, node=10))
    with pytest.raises(TransactionReverted) as e:
        chain.transact(v.game.functions.timeout(m))
    assert e.value.error == "NotImplementedYet"


def test_three_trainers_two_cheaters_settle_through_successive_matches(chain, setup):
    """The registry asks for the next match after each decision (DisputeRequired); the
    honest trainer ends with the payment and all three stakes."""
    from web3.logs import DISCARD
    job, ctx, honest, d = setup
    cheaters = [Trainer(job, d / f"k3-{b.name}-{chain.backend}", b.name, behaviour=b)
                for b in (A.PoisonedData(step=3), A.ForgedCheckpoint(step=2))]
    for t in cheaters:
        t.train()
    v = Verde.deploy(chain)
    accts = {chain.accounts[2].address: honest, chain.accounts[3].address: cheaters[0],
             chain.accounts[4].address: cheaters[1]}
    by_addr = {a.address: a for a in chain.accounts}
    jid, receipt = v.deliver(job, ctx, [(by_addr[a], t) for a, t in accts.items()], PAY, STAKE, chain.accounts[1])
    matches = 0
    while True:
        ev = v.registry.events.DisputeRequired().process_receipt(receipt, errors=DISCARD)
        if not ev:
            break
        a, b = ev[0]["args"]["a"], ev[0]["args"]["b"]
        m = v.open_match(jid, a, b)
        matches += 1
        assert v.play(m, [(by_addr[a], accts[a]), (by_addr[b], accts[b])], ctx) == PHASE_DONE
        receipt = chain.w3.eth.get_transaction_receipt(
            v.game.events.MatchDecided().get_logs(from_block=0)[-1]["transactionHash"])
    assert matches == 2
    assert v.status(jid)[2] == 3  # Settled
    assert v.owed(chain.accounts[2].address) == PAY + 3 * STAKE
    assert v.owed(chain.accounts[3].address) == v.owed(chain.accounts[4].address) == 0
