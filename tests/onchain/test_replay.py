"""Issue #42, claim replay: a claim revealed in one job is public, so a reposted identical job
would pay a trainer that never trained for revealing it again. The registry refuses to post a
spec hash that was revealed in an earlier job (naming it), and `Verde.post` (what `verde post`
calls) says why and what to do before sending; a job that got no reveal may be posted again."""
from types import SimpleNamespace

import pytest

from offchain.chain.client import TransactionReverted
from offchain.chain.verde import JOB_SETTLED, AlreadyComputed, Verde, commitments

PAY, STAKE = 3 * 10**18, 10**18


def _raw_post(v, job, ctx, client):
    """The registry's post, as a client that skips Verde.post's check would send it."""
    now = v.chain.now()
    terms = (*commitments(job, ctx), 3, STAKE, now + 600, now + 1200, now + 1800, 3600)
    return v.chain.transact(v.registry.functions.post(terms), sender=client, value=PAY)


def test_a_job_whose_claim_was_revealed_cannot_be_posted_again(embedded, setup):
    """The replayer's job: the earlier job's result (accepted, its store published) would win
    the repost without training. It is never posted: refused by Verde.post and the registry."""
    job, ctx, honest, _ = setup
    v = Verde.deploy(embedded)
    client, a = embedded.accounts[1], embedded.accounts[2]
    first, _ = v.deliver(job, ctx, [(a, honest)], PAY, STAKE, client)
    assert v.status(first)[2] == JOB_SETTLED
    assert v.chain.call(v.registry.functions.revealedIn(job.job_id)) == first
    with pytest.raises(AlreadyComputed) as e:
        v.post(job, ctx, PAY, STAKE, client=client)
    assert f"revealed in job {first}" in e.value.problem and "replaying" in e.value.problem
    assert f"verde fetch {first}" in e.value.fix and "data.seed" in e.value.fix
    with pytest.raises(TransactionReverted) as e:
        _raw_post(v, job, ctx, client)
    assert e.value.error == "SpecRevealedBefore" and e.value.args_ == (job.job_id, first)
    with pytest.raises(TransactionReverted) as e:
        v.chain.transact(v.registry.functions.postFor((*commitments(job, ctx), 3, STAKE, v.chain.now() + 600,
                                                       v.chain.now() + 1200, v.chain.now() + 1800, 3600),
                                                      [a.address]), sender=client, value=PAY)
    assert e.value.error == "SpecRevealedBefore"


def test_a_job_that_got_no_reveal_may_be_posted_again(embedded, setup):
    """Nobody joined the first posting, and in the second one the trainer committed but never
    revealed: both refunded, nothing made public, and the job can be posted a third time."""
    job, ctx, honest, _ = setup
    v = Verde.deploy(embedded)
    client, a = embedded.accounts[1], embedded.accounts[2]
    lonely = v.post(job, ctx, PAY, STAKE, client=client)
    v.chain.advance(1801)
    v.settle(lonely)
    silent = v.post(job, ctx, PAY, STAKE, client=client)
    v.join_and_commit(silent, job.job_id, honest.final_claim(), STAKE, a)
    v.chain.advance(1801)
    v.settle(silent)
    assert v.chain.call(v.registry.functions.revealedIn(job.job_id)) == 0
    assert v.owed(client.address) == 2 * PAY + STAKE
    third = v.post(job, ctx, PAY, STAKE, client=client)
    assert third == silent + 1


def test_the_refusal_of_an_inference_job_says_it_is_the_same_computation(embedded, monkeypatch):
    """An inference job has no seed to change: the earlier job's outputs are the answer."""
    v = Verde.deploy(embedded)
    job = SimpleNamespace(job_id=b"\x01" * 32, spec=SimpleNamespace(inference=True))
    v.check_new(job)  # nothing revealed for it: no objection
    call = v.chain.call
    monkeypatch.setattr(v.chain, "call", lambda fn, sender=None: 7 if fn.fn_name == "revealedIn" else call(fn, sender))
    with pytest.raises(AlreadyComputed) as e:
        v.check_new(job)
    assert "verde fetch 7" in e.value.fix and "same computation" in e.value.fix and "seed" not in e.value.fix


def test_verde_post_refuses_it_saying_why_and_what_to_do(embedded, setup, tmp_path, capsys):
    import json

    from offchain.chain.client import Chain
    from offchain.cli import main
    job, ctx, honest, d = setup
    v = Verde.deploy(embedded)
    client, a = embedded.accounts[1], embedded.accounts[2]
    first, _ = v.deliver(job, ctx, [(a, honest)], PAY, STAKE, client)
    dep = tmp_path / "deployment.json"
    dep.write_text(json.dumps(v.addresses()))
    as_client = Chain(embedded.w3, [client], "embedded", embedded.artifacts)
    rc = main(["post", str(d / "job" / "job.yaml"), "--payment", "1", "--stake", "1", "--deployment", str(dep)],
              chain=as_client)
    out = " ".join(capsys.readouterr().out.split())
    assert rc == 2 and f"revealed in job {first}" in out and "data.seed" in out and f"verde fetch {first}" in out, out


def test_a_post_s_deadlines_count_from_the_time_it_is_sent_not_a_stale_block(embedded, setup, monkeypatch):
    """A quiet local chain mines on demand, so its latest block can be minutes old when a large
    job's roots are done; deadlines counted from that block had partly passed when the post was
    mined (the 40M scale run's reveal came after revealBy). They count from the later of the
    latest block and the clock."""
    from offchain.chain import verde
    job, ctx, _, _ = setup
    v = Verde.deploy(embedded)
    clock = v.chain.now()  # (the time a block mined now has; earlier tests may have moved it past the wall clock)
    monkeypatch.setattr(v.chain, "now", lambda: clock - 900)  # the latest block, 15 min old
    monkeypatch.setattr(verde, "time", SimpleNamespace(time=lambda: clock))
    jid = v.post(job, ctx, PAY, STAKE, client=embedded.accounts[1])
    monkeypatch.undo()
    join_by, commit_by, reveal_by = v.status(jid)[4][-4:-1]
    assert (join_by, commit_by, reveal_by) == (clock + 600, clock + 1200, clock + 1800)
