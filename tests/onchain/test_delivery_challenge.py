"""The client's remedy against an accepted trainer that does not deliver (issues #22, #42,
JobRegistry.challenge / answer / close): the Python proof of chunks from a published entry
(delivery.prove_from_store, what the agent answers with) against the registry's check of it,
every malformed or late answer refused, and the money in each ending: answered chunks pay
their bonds to the trainer and a finished window pays its hold; any chunk left unanswered
gives the client the hold and the unanswered bonds; nothing is left in the contract."""
import pytest

from offchain.chain.client import TransactionReverted
from offchain.chain.verde import Delivery, Verde, ranges
from offchain.protocol.dataset import initial_state
from offchain.protocol.delivery import STATE, missing_chunks, prove_chunk, prove_from_store, publish
from offchain.protocol.tensors import canonical, chunk_count, commit
from offchain.trainer import Trainer
from offchain.trainer import adversaries as A

PAY, STAKE = 3 * 10**18, 10**18
WINDOW, ANSWER, BOND = 3600, 300, 10**15
SHARE = STAKE + PAY // 2


@pytest.fixture(scope="module")
def other(setup):
    """A trainer with another result (a wrong value at step 3)."""
    job, _, _, d = setup
    t = Trainer(job, d / "delivery-other", "other", behaviour=A.CorruptValue(step=3, node=9))
    t.train()
    return t


@pytest.fixture
def settled(embedded, setup):
    """Two accepted trainers (the same result) with their pay held; -> (v, jid, a, b)."""
    job, ctx, honest, _ = setup
    v = Verde.deploy(embedded, delivery=Delivery(WINDOW, ANSWER, BOND))
    a, b = embedded.accounts[2], embedded.accounts[3]
    jid, _ = v.deliver(job, ctx, [(a, honest), (b, honest)], PAY, STAKE, embedded.accounts[1])
    return v, jid, a, b


def _store(setup, trainer=None):
    """The trainer's published entry (what its agent answers from)."""
    _, _, honest, d = setup
    t = trainer or honest
    publish(t, d / f"store-{t.name}")
    return d / f"store-{t.name}"


def _proof(setup, tensor, chunk, count=1, trainer=None):
    t = trainer or setup[2]
    return prove_from_store(_store(setup, t), t.final_claim(), tensor, chunk, count)


def _big(setup):
    """A state tensor of several chunks."""
    job, _, honest, _ = setup
    state = honest.store.load(job.spec.steps)
    return next(i for i, n in enumerate(initial_state(job).names()) if canonical(state[n]).size > 2 * job.spec.chunk)


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
    assert v.owed(a.address) == v.owed(b.address) == 0
    assert v.hold(jid, a.address).amount == v.hold(jid, b.address).amount == SHARE
    _reverts("TooEarly", v.close, jid, a.address, b)  # only the client may release inside the window
    v.close(jid, a.address, client)  # the client has its model: a is paid now
    v.chain.advance(WINDOW + 1)
    _reverts("ChallengeClosed", v.challenge, jid, b.address, 0, 0, client)
    v.close(jid, b.address, b)
    _reverts("NothingHeld", v.close, jid, b.address, b)
    assert _withdraw_all(v, [a, b, client]) == {a.address: SHARE, b.address: SHARE}


def test_answered_chunks_go_on_chain_and_pay_their_bonds_to_the_trainer(settled, setup):
    v, jid, a, b = settled
    job, _, honest, _ = setup
    client, names, big = v.chain.accounts[1], initial_state(job).names(), _big(setup)
    _reverts("NotClient", v.challenge, jid, a.address, big, 1, b)
    _reverts("NoSuchTensor", v.challenge, jid, a.address, len(names), 0, client)
    _reverts("NoChallenge", v.answer, jid, a.address, _proof(setup, big, 1), a)
    fn = v.registry.functions.challenge(jid, a.address, big, 1, 2)
    _reverts("WrongBond", v.chain.transact, fn, client, BOND)  # a bond per chunk, exactly
    v.challenge(jid, a.address, big, 1, client, count=2)
    _reverts("ChallengeOpen", v.close, jid, a.address, client)  # not while a challenge is open
    _reverts("NotTheResult", v.answer, jid, a.address, _proof(setup, big, 2), a)  # in order: chunk 1 first
    receipt = v.answer(jid, a.address, _proof(setup, big, 1, count=2), b)  # anyone holding the result may
    evs = [e["args"] for e in v.registry.events.DeliveryAnswered().process_receipt(receipt)]
    raw, size = canonical(honest.store.load(job.spec.steps)[names[big]]).tobytes(), job.spec.chunk * 4
    assert [(e["tensor"], e["chunk"], e["data"]) for e in evs] == [(big, k, raw[k * size:(k + 1) * size])
                                                                   for k in (1, 2)]
    h = v.hold(jid, a.address)
    assert (h.open, h.pending, h.asked, h.answered) == (None, 0, 1, 1)
    assert v.owed(a.address) == 2 * BOND  # both bonds: a's, whoever sent the answer
    _reverts("NoChallenge", v.answer, jid, a.address, _proof(setup, big, 3), a)
    v.chain.advance(WINDOW + 1)
    v.close(jid, a.address, a)
    v.close(jid, b.address, b)
    assert _withdraw_all(v, [a, b, client]) == {a.address: SHARE + 2 * BOND, b.address: SHARE}


def test_challenges_queue_each_with_its_own_answer_window_and_a_bounded_range(settled, setup):
    """Any number of challenges, answered in order; each is due an answer window after the one
    before it, so a client asking for many chunks at once gives the trainer time for each."""
    v, jid, a, _ = settled
    client, most = v.chain.accounts[1], v.chain.call(v.registry.functions.MAX_RANGE())
    for bad in (0, most + 1):
        _reverts("BadRange", v.chain.transact, v.registry.functions.challenge(jid, a.address, 0, 0, bad), client,
                 bad * BOND)
    v.challenge(jid, a.address, 0, 0, client, count=2)
    v.challenge(jid, a.address, 1, 0, client)
    dues = [v.chain.call(v.registry.functions.asks(jid, a.address, i))[3] for i in (0, 1)]
    assert dues[1] == dues[0] + ANSWER
    _reverts("MoreThanAsked", v.answer, jid, a.address, _proof(setup, 0, 0, count=3), a)  # one challenge a tx
    v.answer(jid, a.address, _proof(setup, 0, 0, count=2), a)
    v.chain.advance(ANSWER + 1)  # past the first challenge's deadline, inside the second's
    v.answer(jid, a.address, _proof(setup, 1, 0), a)
    assert v.hold(jid, a.address).pending == 0 and v.owed(a.address) == 3 * BOND


def test_chunks_past_the_tensor_s_end_are_answered_by_its_last_chunk(settled, setup):
    """A client cannot ask for chunks that do not exist and collect: one answer's proven shape
    shows that none from there on is there, and the trainer keeps every bond of them."""
    v, jid, a, _ = settled
    job, _, honest, _ = setup
    n = chunk_count(tuple(honest.store.load(job.spec.steps)[initial_state(job).names()[0]].shape), job.spec.chunk)
    v.challenge(jid, a.address, 0, n - 1, v.chain.accounts[1], count=5)  # the last chunk and 4 beyond it
    v.answer(jid, a.address, _proof(setup, 0, n - 1), a)
    p = _proof(setup, 0, n, count=4)
    assert [c.index // job.spec.chunk for c in p.chunks] == [n - 1]
    v.answer(jid, a.address, p, a)
    assert v.hold(jid, a.address).open is None and v.owed(a.address) == 5 * BOND


@pytest.mark.parametrize("bad", ["other-chunk", "other-tensor", "other-state", "flipped-byte", "chunk-size",
                                 "trace-root", "state-proof"])
def test_an_answer_that_is_not_the_accepted_chunk_is_refused(settled, setup, other, bad):
    v, jid, a, b = settled
    job, _, honest, _ = setup
    names, big = initial_state(job).names(), _big(setup)
    v.challenge(jid, a.address, big, 1, v.chain.accounts[1])
    p = _proof(setup, big, 1)
    if bad == "other-chunk":
        p = _proof(setup, big, 0)
    elif bad == "other-tensor":
        p = _proof(setup, big + 1, 0)
    elif bad == "other-state":
        p = _proof(setup, big, 1, trainer=other)
    elif bad == "flipped-byte":
        data = bytearray(p.chunks[0].chunk_bytes)
        data[5] ^= 1
        p = p.__class__(p.state_root, p.trace_root, p.commitment, p.state_proof,
                        (p.chunks[0].__class__(**{**p.chunks[0].__dict__, "chunk_bytes": bytes(data)}),))
    elif bad == "chunk-size":
        state, c2 = honest.store.load(job.spec.steps), job.spec.chunk * 2  # every commitment at its own size
        p = prove_chunk([commit(state[n], c2) for n in names], state[names[big]], c2,
                        honest.open_claim(job.spec.steps)[1], big, 0)
    elif bad == "trace-root":
        p = p.__class__(p.state_root, bytes(32), p.commitment, p.state_proof, p.chunks)
    else:
        p = p.__class__(p.state_root, p.trace_root, p.commitment, p.state_proof[::-1], p.chunks)
    with pytest.raises(TransactionReverted) as e:
        v.answer(jid, a.address, p, a)
    assert e.value.error in ("NotTheResult", "BadChunkLength"), e.value
    assert v.owed(a.address) == 0  # no bond for a refused answer
    v.answer(jid, a.address, _proof(setup, big, 1), a)  # the right one still goes through


def test_an_unanswered_challenge_gives_the_hold_and_the_bonds_to_the_client(settled, setup):
    v, jid, a, b = settled
    client = v.chain.accounts[1]
    v.challenge(jid, b.address, 0, 0, client, count=3)
    v.chain.advance(ANSWER + 1)
    _reverts("AnswerLate", v.answer, jid, b.address, _proof(setup, 0, 0), b)
    receipt = v.close(jid, b.address, a)  # anyone may end it
    ev = v.registry.events.Forfeited().process_receipt(receipt)[0]["args"]
    assert (ev["trainer"], ev["stake"], ev["why"]) == (b.address, SHARE, "did not deliver")
    v.close(jid, a.address, client)
    assert _withdraw_all(v, [a, b, client]) == {a.address: SHARE, client.address: SHARE + 3 * BOND}


def test_a_trainer_that_answers_eight_chunks_then_withholds_loses_its_hold(settled, setup):
    """The attack of issue #42: the withholder delivers nothing off chain and answers the first
    8 chunks asked (what the old cap of 8 challenges let it stop at). The client, which verified
    nothing, asks for every chunk of the state: the withholder must put all of them on chain or
    lose its stake and share, and the client gets back the bond of every chunk not answered."""
    v, jid, a, withholder = settled
    job, _, honest, d = setup
    client = v.chain.accounts[1]
    lacks = missing_chunks(job, d / "an-empty-store", honest.final_claim())
    assert sum(map(len, lacks.values())) > 8  # the whole state
    v.challenge_chunks(jid, withholder.address, lacks, client)
    asked = v.hold(jid, withholder.address).pending
    store, done = _store(setup), 0
    while done < 8:  # its own store, 8 chunks, one transaction each
        h = v.hold(jid, withholder.address)
        v.answer(jid, withholder.address, prove_from_store(store, honest.final_claim(), h.open.tensor,
                                                            h.open.first + h.done), withholder)
        done += 1
    h = v.hold(jid, withholder.address)
    _reverts("ChallengeOpen", v.close, jid, withholder.address, withholder)
    v.chain.advance(h.due - v.chain.now() + 1)
    _reverts("AnswerLate", v.answer, jid, withholder.address,
             prove_from_store(store, honest.final_claim(), h.open.tensor, h.open.first + h.done), withholder)
    v.chain.advance(WINDOW)  # the window's end pays nobody while a challenge is unanswered
    v.close(jid, withholder.address, withholder)
    v.close(jid, a.address, a)
    got = _withdraw_all(v, [a, withholder, client])
    assert got == {a.address: SHARE, withholder.address: 8 * BOND, client.address: SHARE + (asked - 8) * BOND}, got


def test_an_honest_trainer_answers_every_chunk_asked_and_the_client_rebuilds_what_it_lacked(settled, setup):
    """What the agent does (Verde.answer_challenges): every open challenge, in order, several
    chunks a transaction; the chunks in DeliveryAnswered are the tensors the client lacked, and
    the trainer ends with its hold and every bond."""
    v, jid, a, _ = settled
    job, _, honest, d = setup
    client, names = v.chain.accounts[1], initial_state(job).names()
    partial = d / "partial-store"
    publish(honest, partial)
    entry = partial / honest.final_claim().hex()
    from safetensors.torch import load_file, save_file
    state = load_file(str(entry / STATE))
    gone = [names[i] for i in (1, _big(setup))]
    save_file({n: t for n, t in state.items() if n not in gone}, str(entry / STATE))  # two tensors withheld
    lacks = missing_chunks(job, partial, honest.final_claim())
    assert sorted(lacks) == sorted(names.index(n) for n in gone)
    asked = sum(map(len, lacks.values()))
    mark = v.chain.w3.eth.block_number
    v.challenge_chunks(jid, a.address, lacks, client)
    assert v.answer_challenges(jid, a.address, _store(setup), honest.final_claim(), a) == asked
    logs = v.registry.events.DeliveryAnswered().get_logs(from_block=mark)
    answers = [e for e in logs if e["args"]["trainer"] == a.address]
    assert len({e["transactionHash"] for e in answers}) < asked  # several chunks a transaction
    for n in gone:
        i = names.index(n)
        data = b"".join(e["args"]["data"] for e in sorted(answers, key=lambda e: e["args"]["chunk"])
                        if e["args"]["tensor"] == i)
        assert data == canonical(state[n]).tobytes()
    v.close(jid, a.address, client)
    assert v.owed(a.address) == SHARE + asked * BOND


def test_missing_chunks_names_what_a_store_lacks(setup, tmp_path):
    job, _, honest, _ = setup
    claim, names = honest.final_claim(), initial_state(job).names()
    publish(honest, tmp_path)
    assert missing_chunks(job, tmp_path, claim) == {}
    every = missing_chunks(job, tmp_path, bytes(32))  # no such entry: all of it
    assert sorted(every) == list(range(len(names)))
    entry = tmp_path / claim.hex()
    from safetensors.torch import load_file, save_file
    state = load_file(str(entry / STATE))
    state[names[1]] = state[names[1]] + 1  # a tensor that does not match its commitment
    save_file(state, str(entry / STATE))
    assert missing_chunks(job, tmp_path, claim) == {1: every[1]}


def test_ranges_are_runs_of_consecutive_chunks():
    assert ranges([0, 1, 2, 5, 6, 9], 2) == [(0, 2), (2, 1), (5, 2), (9, 1)]
    assert ranges([], 64) == []


def test_without_a_delivery_window_settlement_pays_at_once(embedded, setup):
    job, ctx, honest, _ = setup
    v = Verde.deploy(embedded)
    assert v.delivery().window_s == 0
    a, b = embedded.accounts[2], embedded.accounts[3]
    jid, _ = v.deliver(job, ctx, [(a, honest), (b, honest)], PAY, STAKE, embedded.accounts[1])
    assert v.owed(a.address) == SHARE and v.hold(jid, a.address).amount == 0
    _reverts("NothingHeld", v.challenge, jid, a.address, 0, 0, embedded.accounts[1])
    assert bytes(v.status(jid)[3]) == honest.final_claim()


def test_verde_challenge_from_a_store_asks_for_every_chunk_it_lacks(settled, setup, tmp_path, capsys):
    """`verde challenge --from STORE`: the chunks the client could not verify, no more, with
    their bonds; a store that verifies asks for nothing; --max-bond caps the spend."""
    import json

    from offchain.chain.client import Chain
    from offchain.cli import main
    from safetensors.torch import load_file, save_file
    v, jid, a, _ = settled
    job, _, honest, d = setup
    client = v.chain.accounts[1]
    dep = tmp_path / "deployment.json"
    dep.write_text(json.dumps(v.addresses()))
    store = tmp_path / "store"
    entry = publish(honest, store)
    state = load_file(str(entry / STATE))
    gone = initial_state(job).names()[_big(setup)]
    save_file({n: t for n, t in state.items() if n != gone}, str(entry / STATE))
    as_client = Chain(v.chain.w3, [client], "embedded", v.chain.artifacts)
    args = ["challenge", str(jid), str(d / "job" / "job.yaml"), "--trainer", a.address, "--deployment", str(dep)]
    assert main(args + ["--from", str(store), "--max-bond", "0.000001"], chain=as_client) == 2
    assert "above --max-bond" in " ".join(capsys.readouterr().out.split())
    assert main(args + ["--from", str(store)], chain=as_client) == 0
    lacks = chunk_count(tuple(state[gone].shape), job.spec.chunk)
    assert v.hold(jid, a.address).pending == lacks and f"for {lacks} chunks" in capsys.readouterr().out
    v.answer_challenges(jid, a.address, _store(setup), honest.final_claim(), a)
    assert main(args + ["--from", str(_store(setup))], chain=as_client) == 0
    assert "nothing to ask" in capsys.readouterr().out and v.hold(jid, a.address).asked == 1
