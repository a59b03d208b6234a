"""A trainer agent stakes only on the job its job file implies. A dishonest (or mistaken)
client who posts other commitments under the same spec hash (here a wrong kernel root,
which would make an honest trainer lose a level-3 dispute) gets no trainer; an agent
without a job id finds the right job, and keeps its choice across a restart. A job the chain
cannot settle, or whose data makes a later step fail, posted straight to the registry (past
`verde post`'s checks), gets no trainer either: the agent says why and what the client must change."""
import sys
from pathlib import Path

import pytest

from offchain.agent.policy import TermsRefused
from offchain.agent.trainer_agent import JobMismatch, TrainerAgent, find_job
from offchain.chain import connect
from offchain.chain.verde import COMMITMENT_NAMES, Verde, commitments
from offchain.dispute.context import Context
from offchain.protocol.jobfile import load

sys.path.insert(0, str(Path(__file__).resolve().parent / "protocol"))
from small_job import (classifier_data, first_read_at, write_unsettled_integer_job, write_classifier_job,  # noqa: E402
                       write_small_job)

STAKE = 10**18


@pytest.fixture(scope="module")
def setup(artifacts, tmp_path_factory):
    job_file = write_small_job(tmp_path_factory.mktemp("job"))
    job = load(job_file)
    return job, Context(job)


def _post(v, chain, terms_head):
    now = chain.now()
    terms = (*terms_head, 3, STAKE, now + 600, now + 1200, now + 1800, 3600)
    chain.transact(v.registry.functions.post(terms), sender=chain.accounts[1], value=10**18)


@pytest.mark.parametrize("field", ["kernelRoot", "initialClaim", "steps"])
def test_agent_refuses_a_job_whose_commitments_are_not_its_job_files(setup, artifacts, tmp_path, field):
    job, ctx = setup
    with connect("embedded", artifacts) as chain:
        v = Verde.deploy(chain)
        head = list(commitments(job, ctx))
        i = COMMITMENT_NAMES.index(field)
        head[i] = head[i] + 1 if isinstance(head[i], int) else bytes(31) + b"\x01"
        _post(v, chain, head)
        me = chain.accounts[2]
        before = chain.w3.eth.get_balance(me.address)
        agent = TrainerAgent(v, me, job, 1, tmp_path / "a")
        with pytest.raises(JobMismatch, match=f"different {field} than the job file"):
            agent.tick()
        assert not chain.call(v.registry.functions.seats(1, me.address))[0]
        assert chain.w3.eth.get_balance(me.address) == before  # nothing staked, nothing spent
        assert find_job(v, job, ctx) is None  # and an agent looking for its job does not pick it


def _bad_label_job(directory):
    data = classifier_data()
    data["y"][first_read_at(3)] = 9
    return write_classifier_job(directory, data)


@pytest.mark.parametrize("write,says", [
    (write_unsettled_integer_job, r"(?s)cannot be settled on chain, so this agent did not join: node \d+ \(aten.prod.dim_int\)"
                       r".*Fix: the client must change the job and post it again: ship integers"),
    (_bad_label_job, rf"(?s)data makes a step fail, so this agent did not join: data tensor `y` row {first_read_at(3)} "
                     r"holds 9, outside \[0, 5\).*step 3 reads it.*Fix: the client must correct that row")],
    ids=["argmax", "bad-label"])
def test_agent_refuses_a_job_posted_past_the_client_side_checks(artifacts, tmp_path, write, says):
    """Issue #42: JobRegistry takes any terms; an agent whose other checks (meta step, batch 0)
    pass would have staked, then lost its stake on chain (the unsettleable node) or never
    finished (the bad row). `run` ends before joining, nothing spent."""
    job = load(write(tmp_path / "job"))
    with connect("embedded", artifacts) as chain:
        v = Verde.deploy(chain)
        _post(v, chain, commitments(job, Context(job)))
        me = chain.accounts[2]
        before = chain.w3.eth.get_balance(me.address)
        with pytest.raises(TermsRefused, match=says):
            TrainerAgent(v, me, job, 1, tmp_path / "a").run(poll_s=0, max_s=300)
        assert not chain.call(v.registry.functions.seats(1, me.address))[0]
        assert chain.w3.eth.get_balance(me.address) == before


def test_agent_without_a_job_id_finds_the_right_job_and_keeps_it(setup, artifacts, tmp_path):
    job, ctx = setup
    with connect("embedded", artifacts) as chain:
        v = Verde.deploy(chain)
        me = chain.accounts[2]
        agent = TrainerAgent(v, me, job, None, tmp_path / "a")
        assert agent.tick() is False and agent.jid is None  # nothing posted yet: it waits
        bad = list(commitments(job, ctx))
        bad[COMMITMENT_NAMES.index("kernelRoot")] = bytes(32)
        _post(v, chain, bad)  # job 1: same spec hash, wrong kernel root
        _post(v, chain, commitments(job, ctx))  # job 2: the real one
        _post(v, chain, bad)  # job 3: newer, wrong again
        agent.tick()
        assert agent.jid == 2
        assert chain.call(v.registry.functions.seats(2, me.address))[0]  # joined job 2
        assert not any(chain.call(v.registry.functions.seats(j, me.address))[0] for j in (1, 3))
        agent.state.close()
        again = TrainerAgent(v, me, job, None, tmp_path / "a")  # a restart: the choice is on disk
        assert again.jid == 2


def test_two_agents_cannot_share_a_workdir(setup, artifacts, tmp_path):
    """The second would overwrite the salt the first sealed with (issue #22): refused, with
    the holder named; the workdir is free again once the first is closed."""
    from offchain.agent.state import WorkdirInUse
    job, ctx = setup
    with connect("embedded", artifacts) as chain:
        v = Verde.deploy(chain)
        first = TrainerAgent(v, chain.accounts[2], job, None, tmp_path / "a", ctx=ctx)
        with pytest.raises(WorkdirInUse, match=r"in use by another agent \(pid \d+\)"):
            TrainerAgent(v, chain.accounts[3], job, None, tmp_path / "a", ctx=ctx)
        first.state.close()
        TrainerAgent(v, chain.accounts[3], job, None, tmp_path / "a", ctx=ctx).state.close()


def test_a_lost_salt_is_said_at_start_not_at_reveal_time(setup, artifacts, tmp_path, caplog):
    """Issue #22: an agent restarted without its state (a new workdir) used to start
    silently and crash at reveal with a TypeError. It says at once what will happen."""
    import logging
    job, ctx = setup
    with connect("embedded", artifacts) as chain:
        v = Verde.deploy(chain)
        jid = v.post(job, ctx, 10**18, STAKE, client=chain.accounts[1])
        me = chain.accounts[2]
        first = TrainerAgent(v, me, job, jid, tmp_path / "a", ctx=ctx)
        first.tick()  # join
        first.tick()  # train, seal, commit
        assert chain.call(v.registry.functions.seats(jid, me.address))[2] != bytes(32)
        first.state.close()
        again = TrainerAgent(v, me, job, jid, tmp_path / "elsewhere", ctx=ctx)
        with caplog.at_level(logging.ERROR, logger="verde.agent"):
            assert again.tick() is False
        assert any("CANNOT REVEAL" in r.getMessage() and "will be forfeited" in r.getMessage()
                   for r in caplog.records), caplog.text
        chain.advance(1300)
        again.tick()  # the reveal window: no crash, no reveal
        assert chain.call(v.registry.functions.seats(jid, me.address))[3] == bytes(32)


def test_an_agent_waiting_says_what_for(setup, artifacts, tmp_path):
    """Issue #22: agents were silent for minutes while waiting; the heartbeat names the wait."""
    job, ctx = setup
    with connect("embedded", artifacts) as chain:
        v = Verde.deploy(chain)
        agent = TrainerAgent(v, chain.accounts[2], job, None, tmp_path / "a", ctx=ctx)
        assert agent.doing() == "waiting for its job to be posted"
        jid = v.post(job, ctx, 10**18, STAKE, client=chain.accounts[1])
        agent.jid = jid
        agent.tick()
        agent.tick()  # joined, committed
        assert agent.doing().startswith("committed; the reveal window opens once every seat has committed, or in ")
        chain.advance(1300)
        agent.tick()  # revealed
        assert agent.doing().startswith("revealed; settlement opens once every seat has revealed, or in ")


def test_agents_reveal_and_settle_as_soon_as_every_seat_has_acted(setup, artifacts, tmp_path):
    """The registry's windows close once every seat has acted (JobRegistry.everyoneCommitted,
    everyoneRevealed): two agents on a two-seat job reveal before the commit deadline and settle
    before the reveal deadline, with no clock moved, and are paid; on a three-seat job the same
    two wait for the join deadline (a third could still join and copy)."""
    from offchain.chain.verde import COMMIT_BY, JOB_SETTLED as SETTLED, JOIN_BY, REVEAL_BY
    job, ctx = setup
    with connect("embedded", artifacts) as chain:
        for seats in (2, 3):
            v = Verde.deploy(chain)  # (a registry each: a spec revealed in one cannot be posted there again)
            jid = v.post(job, ctx, 10**18, STAKE, max_trainers=seats, client=chain.accounts[1])
            terms = v.status(jid)[4]
            agents = [TrainerAgent(v, chain.accounts[k], job, jid, tmp_path / f"{seats}-{k}", ctx=ctx) for k in (2, 3)]
            for _ in range(4):  # join, commit (training), reveal, settle: each a tick at most
                for a in agents:
                    a.tick()
            status, now = v.status(jid)[2], chain.now()
            if seats == 2:
                assert status == SETTLED and now < terms[COMMIT_BY], (status, now, terms[COMMIT_BY])
                assert [chain.call(v.registry.functions.seats(jid, a.me.address))[3] for a in agents][0] != bytes(32)
                continue
            assert status != SETTLED and now < terms[JOIN_BY], "a free seat keeps the reveal closed"
            assert all(a.doing().startswith("committed; the reveal window opens once every seat") for a in agents)
            chain.advance(terms[JOIN_BY] - now)
            for _ in range(3):
                for a in agents:
                    a.tick()
            assert v.status(jid)[2] == SETTLED and chain.now() < terms[REVEAL_BY]
