"""The client's remedy against an accepted trainer that does not deliver (issue #22,
JobRegistry.challenge / answer / close): the Python proof of a chunk from a published entry
(delivery.prove_from_store, what the agent answers with) against the registry's check of it, every malformed or late answer refused, and the money
in each ending: an answered challenge and a finished window pay the trainer, an unanswered
one pays the client, and nothing is left in the contract."""
import pytest

from offchain.chain.client import TransactionReverted
from offchain.chain.verde import Delivery, Verde
from offchain.protocol.dataset import initial_state
from offchain.protocol.delivery import prove_chunk, prove_from_store, publish
from offchain.protocol.tensors import canonical, commit
from offchain.trainer import Trainer
from offchain.trainer import adversaries as A

PAY, STAKE = 3 * 10**18, 10**18
WINDOW, ANSWER = 3600, 300


@pytest.fixture(scope="module")
def other(setup):
    """A trainer with another result (a wrong value at step 3)."""
    job, _, _, d = setup
    t = Trainer(job, d / "delivery-other", "other", behaviour=A.CorruptValue(step=3, node=10))
    t.train()
    return t


@pytest.fixture
def settled(embedded, setup):
    """Two accepted trainers (the same result) with their pay held; -> (v, jid, a, b)."""
    job, ctx, honest, _ = setup
    v = Verde.deploy(embedded, delivery=Delivery(WINDOW, ANSWER))
    a, b = embedded.accounts[2], embedded.accounts[3]
    jid, _ = v.deliver(job, ctx, [(a, honest), (b, honest)], PAY, STAKE, embedded.accounts[1])
    return v, jid, a, b


def _proof(setup, tensor, chunk, trainer=None):
    """What an agent answers with: the chunk from its published entry."""
    _, _, honest, d = setup
    t = trainer or honest
    publish(t, d / f"store-{t.name}")
    return prove_from_store(d / f"store-{t.name}", t.final_claim(), tensor, chunk)


def _reverts(error, fn, *args, **kw):
    with pytest.raises(TransactionReverted) as e:
        fn(*args, **kw)
    assert e.value.error == error, e.value


def _withdraw_all(v, accounts):
    got = {}
    for acct in accounts:
        if v.owed(acct.address):
            got[acct.address] = v.owed(acct.address)
            v.chain.transact(v.registry.functions.withdraw(), sender=acct)
    assert v.chain.w3.eth.get_balance(v.registry.address) == 0
    return got


def test_settlement_holds_the_pay_and_a_window_s_end_releases_it(settled):
    v, jid, a, b = settled
    client = v.chain.accounts[1]
    share = STAKE + PAY // 2
    assert v.owed(a.address) == v.owed(b.address) == 0
    assert v.hold(jid, a.address).amount == v.hold(jid, b.address).amount == share
    _reverts("TooEarly", v.close, jid, a.address, b)  # only the client may release inside the window
    v.close(jid, a.address, client)  # the client has its model: a is paid now
    v.chain.advance(WINDOW + 1)
    _reverts("ChallengeClosed", v.challenge, jid, b.address, 0, 0, client)
    v.close(jid, b.address, b)
    _reverts("NothingHeld", v.close, jid, b.address, b)
    assert _withdraw_all(v, [a, b, client]) == {a.address: share, b.address: share}


def test_an_answered_challenge_puts_the_chunk_on_chain_and_the_trainer_is_paid(settled, setup):
    v, jid, a, b = settled
    job, _, honest, _ = setup
    client, names = v.chain.accounts[1], initial_state(job).names()
    tensor = next(i for i, n in enumerate(names) if canonical(honest.store.load(job.spec.steps)[n]).size
                  > 2 * job.spec.chunk)  # a tensor of several chunks: its middle one
    _reverts("NotClient", v.challenge, jid, a.address, tensor, 1, b)
    _reverts("NoSuchTensor", v.challenge, jid, a.address, len(names), 0, client)
    _reverts("NoChallenge", v.answer, jid, a.address, _proof(setup, tensor, 1), a)
    v.challenge(jid, a.address, tensor, 1, client)
    _reverts("ChallengeOpen", v.challenge, jid, a.address, tensor, 2, client)
    _reverts("ChallengeOpen", v.close, jid, a.address, client)  # not while a challenge is open
    receipt = v.answer(jid, a.address, _proof(setup, tensor, 1), b)  # anyone holding the result may answer
    ev = v.registry.events.DeliveryAnswered().process_receipt(receipt)[0]["args"]
    raw = canonical(honest.store.load(job.spec.steps)[names[tensor]]).tobytes()
    size = job.spec.chunk * 4
    assert (ev["tensor"], ev["chunk"]) == (tensor, 1) and ev["data"] == raw[size:2 * size]
    assert v.hold(jid, a.address).due == 0
    v.chain.advance(WINDOW + 1)
    v.close(jid, a.address, a)
    v.close(jid, b.address, b)
    assert _withdraw_all(v, [a, b, client]) == {a.address: STAKE + PAY // 2, b.address: STAKE + PAY // 2}


@pytest.mark.parametrize("bad", ["other-chunk", "other-tensor", "other-state", "flipped-byte", "chunk-size",
                                 "trace-root", "state-proof"])
def test_an_answer_that_is_not_the_accepted_chunk_is_refused(settled, setup, other, bad):
    v, jid, a, b = settled
    job, _, honest, _ = setup
    names = initial_state(job).names()
    big = next(i for i, n in enumerate(names) if canonical(honest.store.load(job.spec.steps)[n]).size
               > 2 * job.spec.chunk)
    v.challenge(jid, a.address, big, 1, v.chain.accounts[1])
    p = _proof(setup, big, 1)
    if bad == "other-chunk":
        p = _proof(setup, big, 0)
    elif bad == "other-tensor":
        p = _proof(setup, big + 1, 0)
    elif bad == "other-state":
        p = _proof(setup, big, 1, other)
    elif bad == "flipped-byte":
        data = bytearray(p.chunk.chunk_bytes)
        data[5] ^= 1
        p = p.__class__(p.state_root, p.trace_root, p.commitment, p.state_proof,
                        p.chunk.__class__(**{**p.chunk.__dict__, "chunk_bytes": bytes(data)}))
    elif bad == "chunk-size":
        state, c2 = honest.store.load(job.spec.steps), job.spec.chunk * 2  # every commitment at its own size
        p = prove_chunk([commit(state[n], c2) for n in names], state[names[big]], c2,
                        honest.open_claim(job.spec.steps)[1], big, 0)
    elif bad == "trace-root":
        p = p.__class__(p.state_root, bytes(32), p.commitment, p.state_proof, p.chunk)
    else:
        p = p.__class__(p.state_root, p.trace_root, p.commitment, p.state_proof[::-1], p.chunk)
    with pytest.raises(TransactionReverted) as e:
        v.answer(jid, a.address, p, a)
    assert e.value.error in ("NotTheResult", "BadChunkLength"), e.value
    v.answer(jid, a.address, _proof(setup, big, 1), a)  # the right one still goes through


def test_a_chunk_past_the_tensor_s_end_is_answered_by_its_last_chunk(settled, setup):
    """A client cannot ask for a chunk that does not exist and collect: the answer's proven
    shape shows it is not there."""
    v, jid, a, _ = settled
    job, _, honest, _ = setup
    v.challenge(jid, a.address, 0, 2**32 - 1, v.chain.accounts[1])
    p = _proof(setup, 0, 2**32 - 1)
    assert p.chunk.index // job.spec.chunk == -(-canonical(honest.store.load(job.spec.steps)[
        initial_state(job).names()[0]]).size // job.spec.chunk) - 1
    v.answer(jid, a.address, p, a)
    assert v.hold(jid, a.address).due == 0


def test_an_unanswered_challenge_gives_the_held_pay_to_the_client(settled, setup):
    v, jid, a, b = settled
    client = v.chain.accounts[1]
    v.challenge(jid, b.address, 0, 0, client)
    v.chain.advance(ANSWER + 1)
    _reverts("AnswerLate", v.answer, jid, b.address, _proof(setup, 0, 0), b)
    receipt = v.close(jid, b.address, a)  # anyone may end it
    ev = v.registry.events.Forfeited().process_receipt(receipt)[0]["args"]
    assert (ev["trainer"], ev["stake"], ev["why"]) == (b.address, STAKE + PAY // 2, "did not deliver")
    v.close(jid, a.address, client)
    assert _withdraw_all(v, [a, b, client]) == {a.address: STAKE + PAY // 2, client.address: STAKE + PAY // 2}


def test_a_client_may_challenge_at_most_max_challenges_times(settled, setup):
    v, jid, a, _ = settled
    client = v.chain.accounts[1]
    most = v.chain.call(v.registry.functions.MAX_CHALLENGES())
    for k in range(most):
        v.challenge(jid, a.address, 0, k, client)
        v.answer(jid, a.address, _proof(setup, 0, k), a)
    _reverts("TooManyChallenges", v.challenge, jid, a.address, 0, 0, client)
    assert v.hold(jid, a.address).asked == most


def test_without_a_delivery_window_settlement_pays_at_once(embedded, setup):
    job, ctx, honest, _ = setup
    v = Verde.deploy(embedded)
    assert v.delivery().window_s == 0
    a, b = embedded.accounts[2], embedded.accounts[3]
    jid, _ = v.deliver(job, ctx, [(a, honest), (b, honest)], PAY, STAKE, embedded.accounts[1])
    assert v.owed(a.address) == STAKE + PAY // 2 and v.hold(jid, a.address).amount == 0
    _reverts("NothingHeld", v.challenge, jid, a.address, 0, 0, embedded.accounts[1])
    assert bytes(v.status(jid)[3]) == honest.final_claim()
