"""Issue #18: an honest trainer never loses its stake or gets stuck. Trainer agents (the real
TrainerAgent, in process) on a local chain (Anvil; VERDE_SECURITY_CHAIN=embedded for the
py-evm one, about 1.2x slower), driven by a scheduler that ticks them in a
random order and moves the chain's clock only when nobody has anything to do, so every
deadline and every chess clock runs out exactly when the agents let it. Invariants, in
every run: the job settles; each honest agent that joined is paid at least its stake plus
its share of the payment; once everybody withdrew, no ETH is left in any contract. With a
delivery window, the client may challenge every accepted trainer: the honest one answers."""
import os
import random
import shutil
import sys
from pathlib import Path

import pytest

from offchain.agent.policy import Policy, TermsRefused
from offchain.agent.trainer_agent import TrainerAgent
from offchain.chain import connect
from offchain.chain.errors import ChainError, TransactionReverted
from offchain.chain.verde import CLOCK, COMMIT_BY, REVEAL_BY, SETTLED_AT, STATE_COUNT, Delivery, Floors, Verde
from offchain.dispute.context import Context
from offchain.protocol.dataset import write_job
from offchain.protocol.jobfile import load
from offchain.trainer import Trainer
from offchain.trainer import adversaries as A

sys.path.insert(0, str(Path(__file__).resolve().parent / "protocol"))
from small_job import mlp_data, write_small_job  # noqa: E402

PAY, STAKE = 3 * 10**18, 10**18
LOCAL_POLICY = Policy(min_answer_window_s=60)  # a local chain's delivery windows (profiles.LOCAL)
SETTLED = 3


@pytest.fixture(scope="module")
def world(artifacts, tmp_path_factory):
    """The job, its context, one chain for the module, and trained checkpoints per behaviour
    (copied into each agent's workdir, so a run trains nothing twice)."""
    d = tmp_path_factory.mktemp("security")
    job = load(write_small_job(d / "job"))
    with connect(os.environ.get("VERDE_SECURITY_CHAIN", "anvil"), artifacts) as chain:
        yield job, Context(job), chain, d


def _trained(world, behaviour) -> Path:
    job, _, _, d = world
    key = d / "trained" / repr(behaviour).replace(" ", "")
    if not key.exists():
        Trainer(job, key, "t", behaviour=behaviour).train()
    return key


class Run:
    """One job: a client, k agents (behaviours), joins in the given order."""

    def __init__(self, world, tmp: Path, behaviours, rng: random.Random, terms: dict | None = None,
                 delivery: Delivery = Delivery(), challenge: bool = False, world_sizes=None, pay: int = PAY,
                 stake: int = STAKE):
        """challenge: once the job settles, the client challenges every accepted trainer once.
        world_sizes: per agent, the processes it trains on (N > 1: it trains, nothing copied)."""
        self.job, self.ctx, self.chain, _ = world
        self.v, self.rng = Verde.deploy(self.chain, delivery=delivery), rng
        self.challenge, self.challenged = challenge, False
        self.client, accts = self.chain.accounts[1], self.chain.accounts[2:2 + len(behaviours)]
        self.jid = self.v.post(self.job, self.ctx, pay, stake, max_trainers=len(behaviours), client=self.client,
                               **(terms or {}))
        self.agents = []
        for i, (acct, beh, n) in enumerate(zip(accts, behaviours, world_sizes or [1] * len(behaviours))):
            work = tmp / f"{i}-{beh.name}"
            if n == 1:
                shutil.copytree(_trained(world, beh), work / "trainer")
            self.agents.append(TrainerAgent(self.v, acct, self.job, self.jid, work, beh, f"{i}-{beh.name}",
                                            ctx=self.ctx, world_size=n, policy=LOCAL_POLICY))
        self.paid = {a.me.address: 0 for a in self.agents}

    def play(self, max_rounds: int = 400, until=None):
        """Join in list order, then tick everyone in a random order; when a round sends no
        transaction, move the clock to the next deadline (or past a chess clock). until(job):
        stop early once it holds."""
        done = set()
        for a in self.agents:
            a.tick()
        for _ in range(max_rounds):
            if until is not None and until(self.v.status(self.jid)):
                return
            before = self.chain.w3.eth.block_number
            for a in self.rng.sample(self.agents, len(self.agents)):
                if a.name not in done and a.tick():
                    done.add(a.name)
            if len(done) == len(self.agents):
                return
            self.idle(before)
        raise AssertionError(f"job {self.jid} not finished after {max_rounds} rounds: status "
                             f"{self.v.status(self.jid)[2]}")

    def idle(self, before: int):
        """The end of a round: the client challenges once the job settles; when the round sent
        no transaction (none since block `before`), the clock moves to the next deadline."""
        j = self.v.status(self.jid)
        if self.challenge and not self.challenged and j[2] == SETTLED:
            self.challenged = True
            for a in self.agents:
                if self.v.hold(self.jid, a.me.address).amount:
                    self.v.challenge(self.jid, a.me.address, self.rng.randrange(j[4][STATE_COUNT]), 0, self.client)
            return
        if self.chain.w3.eth.block_number == before:  # nobody moved: time passes
            terms, now = j[4], self.chain.now()
            times = [terms[COMMIT_BY], terms[REVEAL_BY]]
            if j[2] == SETTLED:  # the delivery window's end, open challenges' deadlines
                times += [j[SETTLED_AT] + self.v.delivery().window_s] + [
                    self.v.hold(self.jid, a.me.address).due for a in self.agents]
            nxt = sorted(t for t in times if t > now)
            self.chain.advance((nxt[0] - now + 1) if nxt else terms[CLOCK] + 1)

    def check(self):
        """The invariants: settled, honest paid stake + share, nothing left anywhere."""
        job = self.v.status(self.jid)
        assert job[2] == SETTLED, job
        logs = self.v.registry.events.Withdrawn().get_logs(from_block=self.v.from_block)
        got = {}
        for e in logs:
            got[e["args"]["to"]] = got.get(e["args"]["to"], 0) + e["args"]["amount"]
        accepted = sum(1 for a in self.agents if not self.chain.call(
            self.v.registry.functions.seats(self.jid, a.me.address))[1])
        for a in self.agents:
            if type(a.trainer.behaviour) is A.Honest:
                assert got.get(a.me.address, 0) >= STAKE + PAY // accepted, (a.name, got, accepted)
        for who in [self.client] + [a.me for a in self.agents]:  # the client's refund, anyone's leftovers
            if self.v.owed(who.address):
                self.chain.transact(self.v.registry.functions.withdraw(), sender=who)
        for c in (self.v.registry, self.v.game, self.v.operators):
            assert self.chain.w3.eth.get_balance(c.address) == 0, c.address
        return got


H = A.Honest
COLLUDERS = {"different": [A.Colluder(step=3, node=9), A.Colluder(step=3, node=17), A.Colluder(step=4, node=9)],
             "same": [A.Colluder(step=3, node=9)] * 3,
             "mixed": [A.Colluder(step=3, node=9), A.Colluder(step=3, node=9), A.Colluder(step=4, node=9)]}


@pytest.mark.parametrize("k", [3, 4])
@pytest.mark.parametrize("claims", sorted(COLLUDERS))
def test_colluders_cannot_stall_a_job_in_any_join_order(world, tmp_path, k, claims):
    """k - 1 silent colluders (different, equal or partly equal wrong claims) and one honest
    agent, which joins first, in between, or last: the pair the registry asks for may be two
    colluders that never open their match; the honest agent opens it, claims the timeout
    (a draw: both out) and ends with the payment and every stake."""
    if claims == "mixed" and k == 3:
        pytest.skip("k = 3 has two colluders: same or different")
    for pos in (0, 1, k - 1):  # first, in between, last (k = 4's second in-between place: ~6 s of CI each)
        colluders = COLLUDERS[claims][:k - 1]
        run = Run(world, tmp_path / f"{pos}", colluders[:pos] + [H()] + colluders[pos:], random.Random(pos))
        run.play()
        got = run.check()
        honest = run.agents[pos].me.address
        assert got[honest] == PAY + k * STAKE, (pos, got)  # the payment and every stake
        assert sum(got.values()) == PAY + k * STAKE, "a colluder got something back"


SUITE = [A.Lazy(start=3), A.PoisonedData(step=3), A.CorruptValue(step=3, node=9), A.Colluder(step=3, node=17),
         A.NeverCommits(step=3, node=9), A.NeverReveals(step=4, node=9), A.Sacrifice(), A.Garbler(step=2, node=9),
         A.Silent(answers=1), A.ReChunked(step=2, node=9), A.Withholder()]


@pytest.mark.parametrize("seed", range(6))
def test_random_schedules_of_adversaries_never_cost_the_honest_agent(world, tmp_path, seed):
    """Random k (2-4), a random mix of the adversary suite (at least one honest agent),
    random join order, random terms within the agents' policy."""
    rng = random.Random(seed)
    k = rng.randint(2, 4)
    behaviours = [H()] + [rng.choice(SUITE) for _ in range(k - 1)]
    rng.shuffle(behaviours)
    join = rng.randint(600, 1200)
    terms = {"join_s": join, "commit_s": join + rng.randint(300, 1800), "clock_s": rng.randint(1800, 7200)}
    terms["reveal_s"] = terms["commit_s"] + rng.randint(300, 1800)
    delivery = Delivery(rng.choice([0, rng.randint(300, 3600)]), rng.randint(60, 600))
    run = Run(world, tmp_path, behaviours, rng, terms, delivery, challenge=rng.random() < 0.5)
    run.play()
    run.check()


def test_a_trainer_that_withholds_the_result_pays_the_client_and_the_honest_one_is_paid(world, tmp_path):
    """Both accepted, both challenged for one chunk: the honest agent answers on chain (its chunk
    is the accepted result's) and is paid its stake, share and the chunk's bond; the
    withholder's held stake and share, and its unanswered bond, go to the client."""
    bond = Delivery().bond_wei
    run = Run(world, tmp_path, [H(), A.Withholder()], random.Random(3), delivery=Delivery(1800, 300), challenge=True)
    run.play()
    assert run.v.owed(run.client.address) == STAKE + PAY // 2 + bond  # the withholder's, before check() withdraws it
    got = run.check()
    honest, withholder = (a.me.address for a in run.agents)
    assert got == {honest: STAKE + PAY // 2 + bond}, got  # the agents' withdrawals: the withholder took nothing
    answered = run.v.registry.events.DeliveryAnswered().get_logs(from_block=run.v.from_block)
    assert [e["args"]["trainer"] for e in answered] == [honest]
    assert not (tmp_path / "1-withholder" / "published").exists() and (tmp_path / "0-honest" / "published").exists()


def test_an_agent_whose_ticks_raise_keeps_going_and_wins_its_match(world, tmp_path, monkeypatch, caplog):
    """Issue #42: an exception in a tick (a bug in a move, a prover that raises, a revert it
    cannot decode) used to end `verde agent`, and its stake was then lost by timeout. Here
    the honest agent's own loop (`run`) meets one before joining, one after its reveal and
    three in its dispute (all the same): each distinct one is logged with its traceback and,
    once it has staked, the stake at risk said; the tick is retried, and the agent still wins
    its match and is paid everything. The other party and the clock move while `run` waits."""
    import itertools
    import logging
    import time
    import types

    from offchain.agent import trainer_agent
    run = Run(world, tmp_path, [H(), A.CorruptValue(step=3, node=9)], random.Random(11))
    honest, cheater = run.agents
    real, ticks, raised, failing = honest.tick, itertools.count(), [], [False]

    def flaky():
        k, status = next(ticks), run.v.status(run.jid)[2]
        failing[0] = True
        seat = run.chain.call(run.v.registry.functions.seats(run.jid, honest.me.address))
        if k == 0:
            raised.append("before joining")
            raise RuntimeError("a bug before joining")
        if seat[3] != bytes(32) and "revealed" not in raised:  # after its own move (the job may be disputed already:
            # once every seat has revealed it settles without waiting for the reveal deadline)
            raised.append("revealed")
            real()
            raise ValueError("cannot decode a revert")
        if status == 2 and raised.count("dispute") < 3 and raised[-1] != "revealed":  # (a good tick between)
            raised.append("dispute")
            raise KeyError("a bug in a move")
        failing[0] = False
        if raised[-1] == "revealed":
            raised.append("ok")
        return real()
    honest.tick = flaky
    cheater_done, last = [False], [run.chain.w3.eth.block_number]

    def others_move(_seconds):  # run's wait: the cheater ticks; the clock passes if nobody moved
        if not cheater_done[0]:
            cheater_done[0] = cheater.tick()
        if not failing[0]:  # a retry comes within seconds: no deadline passes meanwhile
            run.idle(last[0])
        last[0] = run.chain.w3.eth.block_number
    monkeypatch.setattr(trainer_agent, "time", types.SimpleNamespace(time=time.time, sleep=others_move))
    with caplog.at_level(logging.INFO, logger="verde.agent"):
        honest.run(poll_s=0.01, max_s=600)
    assert raised == ["before joining", "revealed", "ok", "dispute", "dispute", "dispute"], raised
    while not cheater_done[0]:
        cheater_done[0] = cheater.tick()
    got = run.check()
    assert got[honest.me.address] == PAY + 2 * STAKE, got
    assert run.v.decision(1)["winner"] == honest.me.address
    failed = [r for r in caplog.records if r.getMessage().startswith(f"{honest.name}: the tick failed:")]
    assert [r.exc_info[0] for r in failed] == [RuntimeError, ValueError, KeyError], caplog.text  # with tracebacks
    risks = [r.getMessage() for r in caplog.records if "A STAKE MAY BE AT RISK" in r.getMessage()]
    assert len(risks) == 2 and "ValueError" in risks[0] and "KeyError" in risks[1], caplog.text  # not before joining
    assert [r.getMessage().split(": ")[1] for r in caplog.records if "failed again" in r.getMessage()] == [
        "the tick failed again (2 in a row)", "the tick failed again (3 in a row)"], caplog.text


def test_an_agent_training_on_two_processes_wins_its_dispute_and_is_paid(world, tmp_path):
    """Issue #19: `verde agent --world-size 2` on a job with micro-batches: its claims are the
    single-process ones, so against a cheater it plays and wins like any honest agent."""
    job1, _, chain, d = world
    job = load(write_job(tmp_path / "job", "mlp", {"d_in": 16, "d_hidden": 32, "n_classes": 10}, mlp_data(),
                         steps=job1.spec.steps, batch_size=8, fanout=job1.spec.fanout, chunk=64, micro_batches=2))
    run = Run((job, Context(job), chain, tmp_path), tmp_path, [H(), A.CorruptValue(step=3, node=10, ulps=1 << 12)],
              random.Random(5), world_sizes=[2, 1])
    run.play()
    got = run.check()
    honest, cheater = (a.me.address for a in run.agents)
    assert got.get(honest, 0) == 2 * STAKE + PAY and cheater not in got, got
    assert (tmp_path / "0-honest" / "trainer" / "losses-distributed.json").exists(), "it trained on two processes"


def test_a_garbler_s_malformed_moves_are_refused_or_rule_against_it(world, tmp_path):
    """Random calldata for every move of both games, in every phase it reaches: the honest
    agent still wins its match and is paid everything (each garbled move was refused or
    ruled against the Garbler), and the Garbler did send them all, more than once."""
    run = Run(world, tmp_path, [H(), A.Garbler(step=2, node=9)], random.Random(7))
    run.play()
    got = run.check()
    assert got[run.agents[0].me.address] == PAY + 2 * STAKE
    from offchain.agent.garbler import _moves
    every = len(_moves(run.v.game)) + len(_moves(run.v.operators))
    assert every >= 15 and run.agents[1].garbled >= 2 * every, "the Garbler tried every move of both games twice"
    assert run.v.decision(1)["winner"] == run.agents[0].me.address


# -- hostile terms ---------------------------------------------------------------------------
def test_the_registry_refuses_terms_below_its_floors(world):
    job, ctx, chain, _ = world
    v = Verde.deploy(chain)
    for kw in ({"clock_s": 1}, {"commit_s": 605}, {"reveal_s": 1205}):
        with pytest.raises(ChainError, match="accepts no less than"):
            v.post(job, ctx, PAY, STAKE, client=chain.accounts[1], **kw)
    now = chain.now()
    from offchain.chain.verde import commitments
    raw = (*commitments(job, ctx), 3, STAKE, now + 600, now + 1200, now + 1800, 1)
    with pytest.raises(TransactionReverted) as e:  # and the contract itself, for a client that skips the check
        chain.transact(v.registry.functions.post(raw), sender=chain.accounts[1], value=PAY)
    assert e.value.error == "BelowFloor"


@pytest.mark.parametrize("terms,why", [({"clock_s": 1}, "dispute clock is 1 s"),
                                       ({"join_s": 5, "commit_s": 6, "reveal_s": 400}, "commit deadline is"),
                                       ({"reveal_s": 1201}, "reveal window is 1 s")])
def test_an_agent_refuses_hostile_terms_before_staking(world, tmp_path, terms, why):
    """A deployment with no floors to speak of (a hostile or careless one): the agent's own
    policy refuses a 1-second clock, a commit deadline it cannot train by, a 1-second reveal
    window; nothing is staked or spent."""
    job, ctx, chain, _ = world
    v = Verde.deploy(chain, Floors(1, 1, 1))
    jid = v.post(job, ctx, PAY, STAKE, client=chain.accounts[1], **terms)
    me = chain.accounts[2]
    before = chain.w3.eth.get_balance(me.address)
    agent = TrainerAgent(v, me, job, jid, tmp_path / "a", name="careful")
    with pytest.raises(TermsRefused, match=why):
        agent.tick()
    assert chain.w3.eth.get_balance(me.address) == before
    assert not chain.call(v.registry.functions.seats(jid, me.address))[0]


def test_an_agent_refuses_a_stake_above_its_limit_and_a_job_it_may_not_join(world, tmp_path):
    job, ctx, chain, _ = world
    v = Verde.deploy(chain)
    jid = v.post(job, ctx, PAY, 2 * STAKE, client=chain.accounts[1])
    agent = TrainerAgent(v, chain.accounts[2], job, jid, tmp_path / "a", policy=Policy(max_stake_wei=STAKE))
    with pytest.raises(TermsRefused, match="more than this agent's limit"):
        agent.tick()
    jid = v.post(job, ctx, PAY, STAKE, client=chain.accounts[1], only=[chain.accounts[3].address])
    agent = TrainerAgent(v, chain.accounts[2], job, jid, tmp_path / "b")
    with pytest.raises(TermsRefused, match="only the trainers its client named"):
        agent.tick()
    assert not chain.call(v.registry.functions.seats(jid, chain.accounts[2].address))[0]


def test_seats_are_the_same_whoever_opens_and_a_both_silent_match_is_a_draw(world, tmp_path):
    """The opener no longer picks seat 0 (the lower address sits there), and when both
    parties let their clocks run out together neither wins (it used to be seat 1)."""
    job, ctx, chain, _ = world
    v = Verde.deploy(chain)
    a, b = sorted((chain.accounts[2], chain.accounts[3]), key=lambda x: int(x.address, 16))
    trainers = [(acct, Trainer(job, _trained(world, beh), "t", behaviour=beh))
                for acct, beh in ((a, A.Colluder(step=3, node=9)), (b, A.Colluder(step=3, node=17)))]
    jid, _ = v.deliver(job, ctx, trainers, PAY, STAKE, chain.accounts[1])
    m = v.open_match(jid, b.address, a.address)  # the higher address asks for seat 0
    assert chain.call(v.game.functions.parties(m)) == [a.address, b.address]
    chain.advance(3601)
    chain.transact(v.game.functions.timeout(m))
    drawn = v.game.events.MatchDrawn().get_logs(from_block=v.from_block)
    assert [e["args"]["id"] for e in drawn] == [m]
    v.settle(jid)
    assert v.status(jid)[2] == SETTLED and v.owed(chain.accounts[1].address) == PAY + 2 * STAKE  # nobody accepted


def test_a_move_too_late_is_named_even_when_only_its_own_block_is_late(world):
    """The chain's clock moved (evm_increaseTime) but no block was mined since: the move
    looks in time on the parent state and reverts in its own block. Its revert is decoded
    (ClockRanOut), not `REVERT None`."""
    job, ctx, chain, _ = world
    if chain.backend != "anvil":
        pytest.skip("needs evm_increaseTime without a block (Anvil)")
    v = Verde.deploy(chain)
    trainers = [(acct, Trainer(job, _trained(world, beh), "t", behaviour=beh))
                for acct, beh in ((chain.accounts[2], H()), (chain.accounts[3], A.Lazy(start=3)))]
    jid, _ = v.deliver(job, ctx, trainers, PAY, STAKE, chain.accounts[1])
    m = v.open_match(jid, chain.accounts[2].address, chain.accounts[3].address)
    chain.w3.provider.make_request("evm_increaseTime", [3601])
    points = list(chain.call(v.game.functions.roundPoints(m)))
    with pytest.raises(TransactionReverted) as e:
        chain.transact(v.game.functions.postClaims(m, trainers[0][1].claim_at(points), []), sender=chain.accounts[2])
    assert e.value.error == "ClockRanOut", e.value


def test_verde_status_shows_deadlines_seats_matches_and_what_is_owed(world, tmp_path):
    """Issue #22's visibility, read from a real run: the phase, deadlines as times with
    countdowns, who committed and revealed, each match's outcome, forfeits with their
    reason, what is owed; the same as JSON."""
    import json
    from offchain.cli.job_view import render, view
    run = Run(world, tmp_path, [H(), A.Colluder(step=3, node=9)], random.Random(3))
    d = view(run.v, run.jid)
    assert d["status"] == "open" and d["phase"] == "joining" and d["deadlines"]["commit"]["in_s"] > 0
    assert "in 19m" in "\n".join(render(d)) or "in 20m" in "\n".join(render(d))  # commit by, 1200 s from posting
    run.play()
    d = view(run.v, run.jid)
    honest, colluder = (a.me.address for a in run.agents)
    by = {t["trainer"]: t for t in d["trainers"]}
    assert by[honest]["revealed"] and not by[honest]["out"]
    assert by[colluder]["out"] and by[colluder]["why_out"] == "lost a match"
    assert [m["result"] for m in d["matches"]] == ["decided"] and d["matches"][0]["winner"] == honest
    assert d["status"] == "settled" and d["accepted"] and d["pot_eth"] == 1.0
    text = "\n".join(render(d))
    assert f"match 1: decided at level 1, {honest} won" in text and "passed" in text, text
    assert json.loads(json.dumps(d)) == d

    # the client gets its model: the accepted agent published it; `verde fetch` checks it
    # against the chain and writes the model's tensors (issue #22)
    import subprocess
    from safetensors.torch import load_file
    from offchain.protocol.dataset import initial_state
    job, _, chain, d_ = world
    store = run.agents[0].publish
    assert (store / run.v.status(run.jid)[3].hex()).is_dir()
    dep = tmp_path / "deployment.json"
    dep.write_text(json.dumps(run.v.addresses()))
    out = tmp_path / "model.safetensors"
    verde = Path(sys.executable).parent / "verde"
    env = {"PATH": "/usr/bin:/bin", "COLUMNS": "200", "VERDE_PRIVATE_KEY": chain.accounts[1].key.to_0x_hex()}
    args = [str(verde), "fetch", str(run.jid), str(next((d_ / "job").glob("*.yaml"))), "--chain",
            f"rpc:{chain._closer.url}", "--deployment", str(dep), "--from", str(store), "--out", str(out)]
    r = subprocess.run(args, capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0 and "checked" in r.stdout, r.stdout + r.stderr
    model = initial_state(job).model
    model.load_state_dict(load_file(str(out)), strict=True)
    r = subprocess.run(args[:-4] + ["--from", str(tmp_path / "empty"), "--out", str(out)], capture_output=True,
                       text=True, env=env, timeout=300)
    assert r.returncode == 2 and "no result" in r.stdout + r.stderr, r.stdout + r.stderr


def test_verde_challenge_and_release_from_the_command_line(world, tmp_path):
    """The client's side of the remedy as a user runs it: `verde status` shows the held pay
    and the window; `verde challenge` asks each accepted trainer for a random chunk; the
    honest agent answers; `verde release` pays it at once and, after the deadline, gives the
    withholder's held pay to the client."""
    import json
    import subprocess
    from offchain.cli.job_view import render, view
    job, _, chain, d_ = world
    run = Run(world, tmp_path, [H(), A.Withholder()], random.Random(5), delivery=Delivery(1800, 300))
    run.play(until=lambda j: j[2] == SETTLED)
    honest, withholder = (a.me.address for a in run.agents)
    d = view(run.v, run.jid)
    assert [t["held_eth"] for t in d["trainers"]] == [(STAKE + PAY // 2) / 1e18] * 2 and d["delivery_hold_until"]
    assert "held for delivery" in "\n".join(render(d)) and "delivery window until" in "\n".join(render(d))
    dep = tmp_path / "deployment.json"
    dep.write_text(json.dumps(run.v.addresses()))
    env = {"PATH": "/usr/bin:/bin", "COLUMNS": "200", "VERDE_PRIVATE_KEY": run.client.key.to_0x_hex(),
           "VERDE_CHAIN": f"rpc:{chain._closer.url}", "VERDE_DEPLOYMENT": str(dep)}
    job_file = str(next((d_ / "job").glob("*.yaml")))

    def verde(*args):
        r = subprocess.run([str(Path(sys.executable).parent / "verde"), *args], capture_output=True, text=True,
                           env=env, timeout=300)
        return r.returncode, r.stdout + r.stderr

    for who in (honest, withholder):
        rc, out = verde("challenge", str(run.jid), job_file, "--trainer", who)
        assert rc == 0 and "asked" in out, out
    rc, out = verde("challenge", str(run.jid), job_file, "--trainer", chain.accounts[7].address)
    assert rc == 2 and "no pay held" in out, out
    assert "challenged for chunk" in "\n".join(render(view(run.v, run.jid)))
    rc, out = verde("release", str(run.jid))  # challenges open: nothing moves yet
    assert rc == 1 and "ChallengeOpen" in out, out
    for a in run.agents:
        a.tick()  # the honest agent answers; the withholder does not
    assert run.v.hold(run.jid, honest).due == 0 and run.v.hold(run.jid, withholder).due
    rc, out = verde("release", str(run.jid), "--trainer", honest)
    assert rc == 0 and "released to it" in out, out
    chain.advance(301)
    rc, out = verde("release", str(run.jid))
    assert rc == 0 and "to the client: it did not answer" in out, out
    bond = Delivery().bond_wei  # one chunk each: the honest one's answered, the withholder's back to the client
    assert run.v.owed(run.client.address) == run.v.owed(honest) == STAKE + PAY // 2 + bond
    assert not run.v.owed(withholder)


# -- a dispute clock shorter than the honest trainer's re-execution ----------------------------
SLOW_STEP_S = 1500  # the honest agent's step, in chain seconds: a real job's step on a real box, scaled


def _slow_run(world, tmp_path, clock_s: int, policy: Policy | None = None) -> Run:
    """The honest agent (seat 0) against a cheater that answers at once (its wrong value at step 0:
    the dispute narrows to the first interval, where the honest agent re-executes the most).
    Every step the honest agent runs once the job is disputed takes SLOW_STEP_S of chain time,
    and it measured that before staking (seconds_per_step), so its policy weighs the truth.
    The terms give it the commit window its policy asks for (3x its training time)."""
    job = world[0]
    train = SLOW_STEP_S * job.spec.steps
    terms = {"join_s": 600, "commit_s": 600 + 4 * train, "clock_s": clock_s}
    terms["reveal_s"] = terms["commit_s"] + 600
    run = Run(world, tmp_path, [H(), A.CorruptValue(step=0, node=9)], random.Random(7), terms)
    honest = run.agents[0]
    if policy is not None:
        honest.policy = policy
    honest.trainer.seconds_per_step = lambda: SLOW_STEP_S
    run_step, chain, reg = honest.trainer._run, run.chain, run.v.registry

    def slow(st, s, recorder=None):
        out = run_step(st, s, recorder)
        if chain.call(reg.functions.job(run.jid))[2] != 1:  # not Open: disputed, the honest one computes
            chain.advance(SLOW_STEP_S)
        return out
    honest.trainer._run = slow
    return run


def test_an_agent_refuses_a_dispute_clock_shorter_than_its_re_execution(world, tmp_path):
    """A hostile client's terms within every floor and the old policy: a 30-minute clock on a
    job whose dispute makes the honest trainer re-execute steps of 25 minutes each (level 1's
    intervals, then the disputed step's traces). A sybil that answers every move at once would
    run the honest clock out and take its stake; the agent refuses the job before staking."""
    run = _slow_run(world, tmp_path, clock_s=1800)
    honest = run.agents[0]
    with pytest.raises(TermsRefused, match="dispute clock is 1800 s"):
        honest.tick()
    assert not run.chain.call(run.v.registry.functions.seats(run.jid, honest.me.address))[0]


def test_a_slow_honest_agent_wins_on_the_clock_its_policy_asks_for(world, tmp_path):
    """The same job and cheater, on the least clock the agent's policy accepts: the honest
    agent's re-executions fit its clock, it wins and is paid the payment and both stakes."""
    job = world[0]
    clock = Policy().least_clock_s(SLOW_STEP_S * job.spec.steps, job.spec.steps, job.spec.fanout)
    run = _slow_run(world, tmp_path, clock_s=clock)
    run.play()
    got = run.check()
    assert got == {run.agents[0].me.address: PAY + 2 * STAKE}, got


# -- a deployment's delivery terms and the time a stake is held ---------------------------------
@pytest.mark.parametrize("delivery,why", [(Delivery(1800, 10), "answer window is 10 s"),
                                          (Delivery(1800, 300, 0), "challenge bond is 0 ETH")])
def test_an_agent_refuses_a_registry_whose_delivery_terms_take_an_honest_hold(world, tmp_path, delivery, why):
    """A hostile (or careless) deployment's delivery terms, which no floor bounds: with a 10 s
    answer window on a chain of 12 s slots the client challenges one chunk of the accepted
    result and the honest trainer's answer is late, so its held stake and share are the
    client's (shown by the run below, with the old policy); with a bond of 0 the client makes
    it pay the gas of putting the model on chain. The agent refuses before staking."""
    job, ctx, chain, _ = world
    v = Verde.deploy(chain, delivery=delivery)
    jid = v.post(job, ctx, PAY, STAKE, client=chain.accounts[1])
    me = chain.accounts[2]
    agent = TrainerAgent(v, me, job, jid, tmp_path / "a", name="careful")
    with pytest.raises(TermsRefused, match=why):
        agent.tick()
    assert not chain.call(v.registry.functions.seats(jid, me.address))[0]


def test_without_the_check_a_short_answer_window_hands_the_honest_hold_to_the_client(world, tmp_path):
    """Why the check: the same deployment, the check switched off. The honest agent is accepted
    alone; the client challenges one chunk; the chain's next slot (12 s) is past the 10 s answer
    window, so `close` gives the client the held stake and share: it paid 3 ETH and takes 4."""
    run = Run(world, tmp_path, [H()], random.Random(1), delivery=Delivery(1800, 10))
    run.agents[0].policy = Policy(min_answer_window_s=0)
    run.play(until=lambda j: j[2] == SETTLED)
    honest = run.agents[0].me.address
    run.v.challenge(run.jid, honest, 0, 0, run.client)
    run.chain.advance(12)
    run.play()
    assert run.v.owed(run.client.address) == PAY + STAKE + Delivery().bond_wei
    assert run.v.owed(honest) == 0


@pytest.mark.parametrize("terms", [{"clock_s": 10**9}, {"reveal_s": 400 * 86400, "commit_s": 399 * 86400}])
def test_an_agent_refuses_terms_that_would_hold_its_stake_for_years(world, tmp_path, terms):
    """A clock of 30 years (a cheater that never moves holds the honest stake that long before its
    timeout) or a reveal deadline a year away: no floor bounds them from above. Refused."""
    job, ctx, chain, _ = world
    v = Verde.deploy(chain)
    jid = v.post(job, ctx, PAY, STAKE, client=chain.accounts[1], **terms)
    me = chain.accounts[2]
    agent = TrainerAgent(v, me, job, jid, tmp_path / "a", name="careful")
    with pytest.raises(TermsRefused, match="its stake could be held"):
        agent.tick()
    assert not chain.call(v.registry.functions.seats(jid, me.address))[0]


# -- the gas an honest trainer spends ------------------------------------------------------------
@pytest.mark.parametrize("pay,stake,why", [(PAY, 10**9, "less than the gas a cheater's match costs this agent"),
                                           (1, STAKE, "its payment is 1e-18 ETH, less than its 3 seats' own moves")])
def test_an_agent_refuses_a_stake_or_payment_that_does_not_pay_its_gas(world, tmp_path, pay, stake, why):
    """A cheater's forfeited stake is what pays the honest trainer for the match it forces (a few
    million gas: level 1's rounds, levels 2-5, resolveStep), and a seat's share of the payment
    for its own moves; a client posting a 1-gwei stake (its own cheater joins) or a 1-wei payment
    makes an honest trainer pay to train (shown below with 1 wei, with the check off). Refused before
    staking, at the policy's margin over today's gas price."""
    job, ctx, chain, _ = world
    v = Verde.deploy(chain)
    jid = v.post(job, ctx, pay, stake, client=chain.accounts[1])
    me = chain.accounts[2]
    before = chain.w3.eth.get_balance(me.address)
    agent = TrainerAgent(v, me, job, jid, tmp_path / "a", name="careful", policy=LOCAL_POLICY)
    with pytest.raises(TermsRefused, match=why):
        agent.tick()
    assert not chain.call(v.registry.functions.seats(jid, me.address))[0]
    assert chain.w3.eth.get_balance(me.address) == before


def test_without_the_check_a_cheater_with_a_tiny_stake_costs_the_honest_trainer_gas(world, tmp_path):
    """Why the check: a stake and payment of 1 wei, the check off. The cheater loses at level 5 and
    the honest agent is paid the payment and both stakes, and still ends with less ETH than it
    started with: its moves cost more gas than the cheater's stake pays. With the stake its policy
    asks for, the same cheater pays for the honest agent's every move (the last test of this
    module's runs: the honest agent's balance grows)."""
    import dataclasses
    tiny = 1  # (a local chain's base fee falls to a few wei: a gwei stake may pay for the gas there)
    run = Run(world, tmp_path, [H(), A.CorruptValue(step=3, node=9)], random.Random(5), pay=tiny, stake=tiny)
    honest = run.agents[0]
    for a in run.agents:
        a.policy = dataclasses.replace(LOCAL_POLICY, gas_price_margin=0)  # the old policy: gas not counted
    before = run.chain.w3.eth.get_balance(honest.me.address)
    run.play()
    got = {e["args"]["to"]: e["args"]["amount"]
           for e in run.v.registry.events.Withdrawn().get_logs(from_block=run.v.from_block)}
    assert got[honest.me.address] == tiny + 2 * tiny  # it won: the payment and both stakes
    assert run.chain.w3.eth.get_balance(honest.me.address) < before  # and paid more in gas


def test_an_honest_agent_s_gas_in_a_dispute_is_within_its_policy_s_budget(world, tmp_path):
    """The policy's budget (policy.honest_gas) against what an honest agent spends: a cheater
    that forces a dispute down to level 5, and one that lies at level 3; the honest agent's gas
    over the whole job (join to withdraw) stays under it, and with the stake the policy asks for
    its balance grows."""
    from offchain.agent.policy import honest_gas
    for seed, cheater in enumerate([A.CorruptValue(step=3, node=9), A.KernelCheat()]):
        run = Run(world, tmp_path / str(seed), [H(), cheater], random.Random(seed))
        honest = run.agents[0].me.address
        before, first = run.chain.w3.eth.get_balance(honest), run.chain.w3.eth.block_number + 1
        run.play()
        run.check()
        gas = 0
        for n in range(first, run.chain.w3.eth.block_number + 1):
            for tx in run.chain.w3.eth.get_block(n, full_transactions=True).transactions:
                if tx["from"] == honest:
                    gas += run.chain.w3.eth.get_transaction_receipt(tx["hash"])["gasUsed"]
        budget = honest_gas(run.v.status(run.jid)[4])
        assert 0 < gas < budget / 1.5, (type(cheater).__name__, gas, budget)
        assert run.chain.w3.eth.get_balance(honest) > before


def test_an_agent_refuses_a_job_whose_checkpoints_its_disk_cannot_hold(world, tmp_path):
    """A disk that fills mid-job stops an honest trainer after it staked (no space left for a
    checkpoint), and the stake is lost to the deadlines it then misses: refused before joining,
    nothing sent, the figures said. (A reserve larger than the disk stands in for a full one.)"""
    import dataclasses

    from offchain.agent.policy import FANOUT, STEPS, checkpoints
    from offchain.agent.trainer_agent import NotEnoughDisk
    from offchain.chain.verde import MAX_TRAINERS
    job, ctx, chain, _ = world
    v = Verde.deploy(chain)
    jid = v.post(job, ctx, PAY, STAKE, client=chain.accounts[1])
    free_mb = shutil.disk_usage(tmp_path).free // 2**20
    agent = TrainerAgent(v, chain.accounts[2], job, jid, tmp_path / "a", name="full",
                         policy=dataclasses.replace(LOCAL_POLICY, disk_reserve_mb=free_mb + 1))
    agent.__dict__["train_s"] = 1.0  # (no training step timed: only the disk is checked here)
    terms = v.status(jid)[4]
    n = checkpoints(terms[STEPS], terms[FANOUT], terms[MAX_TRAINERS])
    sent = chain.w3.eth.get_transaction_count(chain.accounts[2].address)  # (the module's other jobs used it)
    with pytest.raises(NotEnoughDisk, match=rf"up to {n} checkpoints .*--disk-reserve-mb.* GB free") as e:
        agent.tick()
    assert "--workdir" in e.value.fix
    assert chain.w3.eth.get_transaction_count(chain.accounts[2].address) == sent
    assert not chain.call(v.registry.functions.seats(jid, chain.accounts[2].address))[0]
    # the same agent with the disk it has joins
    agent.policy = dataclasses.replace(LOCAL_POLICY, disk_reserve_mb=0)
    agent.tick()
    assert chain.call(v.registry.functions.seats(jid, chain.accounts[2].address))[0]


def test_an_agent_refuses_a_key_that_holds_the_stake_but_not_its_moves_gas(world, tmp_path):
    """A key that holds the stake and a join's gas, not the gas of the moves after it (commit,
    reveal, a match against each other seat): a cheater's dispute would outlast its funds, and the
    stake would be lost to a dispute clock it cannot pay to meet. Refused before joining, nothing
    sent. (A policy budgeting gas at many times this chain's price stands in for a real network's.)"""
    import dataclasses

    from eth_account import Account

    from offchain.agent.trainer_agent import CannotAffordStake
    from offchain.agent.policy import honest_gas
    job, ctx, chain, _ = world
    v = Verde.deploy(chain)
    stake = 4 * 10**18
    jid = v.post(job, ctx, PAY, stake, client=chain.accounts[1])
    poor = Account.create()
    chain._send("fund", {"to": poor.address, "value": stake + 2 * 10**18}, chain.accounts[0])  # (a local chain's
    # fee cap wants 1.5 ETH free for any transaction)
    # the gas price its moves are budgeted at: 4 ETH for a job of 3 seats (the stake and payment still pay for it)
    margin = 4 * 10**18 / (honest_gas(v.status(jid)[4]) * chain.w3.eth.gas_price)
    agent = TrainerAgent(v, poor, job, jid, tmp_path / "a", name="poor",
                         policy=dataclasses.replace(LOCAL_POLICY, gas_price_margin=margin))
    agent.__dict__["train_s"] = 1.0  # (no training step timed: only the funds are checked here)
    with pytest.raises(CannotAffordStake, match="for the gas of its moves"):
        agent.tick()
    assert chain.w3.eth.get_transaction_count(poor.address) == 0
    assert not chain.call(v.registry.functions.seats(jid, poor.address))[0]
