"""A trainer agent: one job, one account. Each tick reads the job and its seat from the
chain and does the one thing that is due (join, train and commit, reveal, settle, move in
its matches, withdraw), so a restart after kill -9 at any point simply carries on: the
chain says what was done, the checkpoints keep the training, AgentState keeps the salt."""
from __future__ import annotations

import functools
import logging
import math
import os
import random
import shutil
import time
from pathlib import Path

from repops.errors import RepOpsError

from ..chain.errors import ChainError, ChainUnavailable, DeploymentError, TransactionReverted
from ..chain.verde import (CLOCK, COMMIT_BY, COMMITMENT_NAMES, JOIN_BY, MAX_TRAINERS, OP_PHASE_NAMES, PHASE_DONE,
                           PHASE_NAMES, PHASE_OPERATOR, REVEAL_BY, SETTLED_AT, STAKE, NotSettleableOnChain, Verde,
                           check_settleable, commitments)
from ..chain.verde import JOB_DISPUTED as DISPUTED, JOB_OPEN as OPEN, JOB_SETTLED as SETTLED
from ..protocol import datacheck
from ..protocol.claims import seal
from ..protocol.job import JobError
from .policy import Policy, TermsRefused, honest_gas
from .state import AgentState

log = logging.getLogger("verde.agent")


class CannotAffordStake(ChainError):
    pass


class NotEnoughDisk(ChainError):
    """This machine's disk cannot hold what the job writes: staking would lose the stake mid-job."""


class NodeGone(ChainError):
    pass


class JobMismatch(ChainError):
    """The job on chain is not the job file this agent was given: staking on it could only lose."""


# decisions not to stake, raised by the checks before joining (the contracts, the job file, the
# terms, the funds, a device that cannot compute the job): they end an agent that has not joined
REFUSALS = (DeploymentError, JobMismatch, TermsRefused, CannotAffordStake, NotEnoughDisk, JobError, RepOpsError)
RETRY_MAX_S = 5.0  # the longest wait between retries of a failing tick


def find_job(v: Verde, job, ctx) -> int | None:
    """The newest job open for joining whose terms are this job file's (spec hash first, then
    every commitment), or None."""
    now = v.chain.now()
    for e in reversed(v.registry.events.JobPosted().get_logs(from_block=v.from_block)):
        if bytes(e["args"]["specHash"]) != job.job_id:
            continue
        jid = e["args"]["id"]
        j = v.status(jid)
        if j[2] == OPEN and now < j[4][JOIN_BY] and not mismatches(j[4], job, ctx):
            return jid
    return None


def mismatches(terms, job, ctx) -> list[str]:
    """Names of the committed terms that differ from what the job file implies."""
    return [name for name, got, want in zip(COMMITMENT_NAMES, terms, commitments(job, ctx)) if got != want]


class TrainerAgent:
    def __init__(self, verde: Verde, account, job, job_id: int | None, workdir: Path, behaviour=None,
                 name: str = "agent", device: str = "cpu", policy: Policy = Policy(), ctx=None,
                 publish: Path | None = None, world_size: int = 1):
        """job_id None: wait for the job file's job to be posted (find_job), then play that one.
        ctx: the job's referee context, if the caller has it (it costs a traced step).
        publish: the result store it delivers an accepted result to (default: workdir/published).
        world_size: processes its training runs on (its answers re-execute in one)."""
        from ..dispute.context import Context
        from ..trainer import Trainer
        self.v, self.me, self.job = verde, account, job
        self.state = AgentState(Path(workdir) / "agent.sqlite")
        self.trainer = Trainer(job, Path(workdir) / "trainer", name, device=device, behaviour=behaviour, progress=True,
                               world_size=world_size)
        self.ctx = ctx or Context(job)
        self.name, self.policy = name, policy
        self.publish = Path(publish) if publish else Path(workdir) / "published"
        self.jid = job_id if job_id is not None else self.state.chosen(job.job_id)
        self._waiting = False
        self._said: set = set()  # warnings already given (each once)
        self._rng = random.Random(name)  # a Garbler's malformed moves
        self.garbled = 0  # malformed moves a Garbler sent

    def _seat(self):
        """(joined, out, sealed, claim) of this agent in its job."""
        return self.v.chain.call(self.v.registry.functions.seats(self.jid, self.me.address))

    def _send(self, what, fn, value=0):
        log.info("%s: %s", self.name, what)
        return self.v.chain.transact(fn, sender=self.me, value=value)

    def _try(self, what, fn) -> bool:
        """A transaction anyone may send (settle, open, timeout): another party may have sent
        it first, which is fine."""
        try:
            self.v.chain.call(fn, sender=self.me)
        except TransactionReverted:
            return False
        try:
            self._send(what, fn)
        except TransactionReverted as e:  # a race another party won (WrongStatus, AlreadyOpen): harmless
            log.debug("%s: %s: %s (sent first by another party)", self.name, what, e.error)
            return False
        return True

    def tick(self) -> bool:
        """Do what is due now. -> True once there is nothing left to do for this job."""
        if self.jid is None:
            self.jid = find_job(self.v, self.job, self.ctx)
            if self.jid is None:
                if not self._waiting:
                    self._waiting = True
                    log.info("%s: waiting for job %s… to be posted", self.name, self.job.job_id.hex()[:16])
                return False
            self.state.choose(self.job.job_id, self.jid)
            log.info("%s: found job %d", self.name, self.jid)
        j = self.v.status(self.jid)
        status, terms = j[2], j[4]
        now = self.v.chain.now()
        joined, out, sealed, claim = self._seat()
        reg = self.v.registry.functions
        if status == OPEN:
            if not joined:
                if now >= terms[JOIN_BY]:
                    log.warning("%s: job %d closed for joining (a job nobody joined: its client recovers the "
                                "payment with `verde settle %d` now that joining is over)", self.name, self.jid,
                                self.jid)
                    return True
                self.v.verify()  # Verde's contracts, not the client's (attach and deploy checked them)
                self._check_terms(terms, now, restricted=j[7], payment=j[1])
                self._check_funds(terms)
                self._check_disk(terms)
                self._send("join (stake)", reg.join(self.jid), value=terms[STAKE])
                if self.delivery_window_s:
                    log.info("%s: if accepted, its pay is held for %d s after settlement while the client may ask "
                             "for chunks of the result on chain (this agent answers them)", self.name,
                             self.delivery_window_s)
                return False
            if sealed == bytes(32) and now < terms[COMMIT_BY] and self._acts("commit"):
                final = self.trainer.train()
                mine = self.state.sealed(self.jid)
                if mine is None:
                    mine = (final, os.urandom(32))
                    self.state.seal(self.jid, *mine)  # durable before the commit that needs it
                try:
                    self._send("commit (sealed result)", reg.commit(self.jid, seal(self.job.job_id, self.me.address,
                                                                                    *mine)))
                except TransactionReverted as e:
                    if e.error != "CommitClosed":
                        raise
                return False
            if sealed == bytes(32) and now >= terms[COMMIT_BY]:
                self._once("missed-commit", f"MISSED THE COMMIT DEADLINE of job {self.jid}: training did not end in "
                           f"time; its stake of {terms[STAKE] / 1e18} ETH will be forfeited at settlement")
            unrevealed = sealed != bytes(32) and claim == bytes(32)
            mine = self.state.sealed(self.jid) if unrevealed else None
            if unrevealed and mine is None:  # said at once, not at reveal time
                self._once("lost-salt", f"CANNOT REVEAL in job {self.jid}: it committed, but the salt of its "
                           f"commitment is not in {self.state.path} (another workdir? a deleted one?); its stake of "
                           f"{terms[STAKE] / 1e18} ETH will be forfeited unless that agent state is put back "
                           "before the reveal deadline")
            if mine is not None and self.v.reveal_open(self.jid, terms, now) and self._acts("reveal"):
                T = self.job.spec.steps  # (a fault claim reveals its step and trace: revealFault)
                self._send("reveal", self.v.reveal_call(self.jid, *mine, self.trainer.open_claim(T), T))
                return False
            if claim != bytes(32) or now >= terms[REVEAL_BY]:  # (its own reveal first: settling asks every seat's)
                if self.v.settle_open(self.jid, terms, now) and self._acts("settle"):
                    self._try("settle", reg.settle(self.jid))
            return False
        if status == DISPUTED:
            self._play(terms)
            return False
        if (status == SETTLED and not out and bytes(j[3]) == bytes(claim) and "published" not in self._said
                and self._acts("publish")):
            self._said.add("published")
            if self.trainer.fault_step is not None:  # a fault has no model to deliver
                log.info("%s: its fault claim was accepted (step %d cannot be computed: %s); paid for the steps "
                         "before it, nothing to publish", self.name, self.trainer.fault_step, self.trainer.faulted().rule)
            else:
                from ..protocol.delivery import publish
                entry = publish(self.trainer, self.publish)
                log.info("%s: its result was accepted; published it for the client at %s (verde fetch %d)", self.name,
                         entry, self.jid)
        if status == SETTLED and self._held(j, now):
            return False
        owed = self.v.owed(self.me.address)
        if owed:
            self._send(f"withdraw {owed / 1e18} ETH", reg.withdraw())
        if status == SETTLED:
            self._report_forfeit(terms)
        return status == SETTLED

    def _held(self, j, now: int) -> bool:
        """While its pay is held for delivery: answer every chunk the client challenged (from its
        published result, proven, on chain, in order; each chunk answered pays its bond), and end
        the hold once the window is over. -> True while held."""
        h = self.v.hold(self.jid, self.me.address)
        if not h.amount:
            return False
        if h.due and now < h.due and self._acts("deliver"):
            log.info("%s: answer the client's delivery challenges on chain (%d chunks asked and not yet answered)",
                     self.name, h.pending)
            try:
                self.v.answer_challenges(self.jid, self.me.address, self.publish, bytes(j[3]), self.me)
            except TransactionReverted as e:
                log.info("%s: answer: %s", self.name, e.error)  # answered by someone else, or too late
            return True
        if not h.due and now >= j[SETTLED_AT] + self.delivery_window_s:
            self._try(f"end the delivery hold ({h.amount / 1e18} ETH)",
                      self.v.registry.functions.close(self.jid, self.me.address))
        elif h.due and now >= h.due:
            self._try("close the unanswered delivery challenge", self.v.registry.functions.close(self.jid,
                                                                                                  self.me.address))
        return True

    def _once(self, key: str, message: str):
        """A warning that matters (a deadline missed, a stake at risk): loud, and once."""
        if key not in self._said:
            self._said.add(key)
            log.error("%s: %s", self.name, message)

    def _report_forfeit(self, terms):
        for e in self.v.registry.events.Forfeited().get_logs(from_block=self.v.from_block,
                                                             argument_filters={"id": self.jid}):
            if e["args"]["trainer"] == self.me.address:
                self._once("forfeit", f"LOST ITS STAKE of {e['args']['stake'] / 1e18} ETH in job {self.jid}: "
                           f"{e['args']['why']}")

    def _check_terms(self, terms, now: int, restricted: bool = False, payment: int | None = None):
        """Before staking: the job on chain must commit to exactly what this job file implies
        (a wrong kernel root or initial claim, say, would make an honest trainer lose), and
        its other terms must pass this agent's policy (a clock or a deadline it cannot meet
        would)."""
        bad = mismatches(terms, self.job, self.ctx)
        if bad:
            raise JobMismatch(f"job {self.jid} on chain commits to a different {', '.join(bad)} than the job file "
                              f"{self.job.job_id.hex()[:16]}… implies, so this agent did not join",
                              "pass the job file that was posted, or another job id; do not stake on this job")
        if restricted and not self.v.chain.call(self.v.registry.functions.approved(self.jid, self.me.address)):
            raise TermsRefused(f"job {self.jid} takes only the trainers its client named, and {self.me.address} "
                               "is not one of them", "ask the client to name this address (verde post --only)")
        try:
            check_settleable(self.ctx)
        except NotSettleableOnChain as e:
            raise TermsRefused(f"job {self.jid} cannot be settled on chain, so this agent did not join: {e.problem}",
                               f"the client must change the job and post it again: {e.fix}") from None
        try:
            datacheck.check(self.job)
        except datacheck.DataOutOfRange as e:
            raise TermsRefused(f"job {self.jid}'s data makes a step fail, so this agent did not join: {e}",
                               "the client must correct that row of the data file and post the job again") from None
        why = self.policy.refusals(terms, now, self.train_s, self.v.delivery(), self.v.chain.w3.eth.gas_price,
                                   payment)
        if why:
            raise TermsRefused(f"job {self.jid}'s terms could cost an honest trainer its stake, so this agent did not "
                               f"join: {'; '.join(why)}",
                               "ask the client to post the job again with safer terms, or relax this agent's policy "
                               "with the flag named, if you accept the risk")

    @functools.cached_property
    def delivery_window_s(self) -> int:
        """How long after settlement an accepted result's pay is held (fixed at deployment)."""
        return self.v.delivery().window_s

    @functools.cached_property
    def train_s(self) -> float:
        """This job's training time here, estimated from one timed step (before staking)."""
        return self.trainer.seconds_per_step() * self.job.spec.steps

    def _check_funds(self, terms):
        """Refuse before sending: a key that holds the stake but not the gas of the moves that
        follow (commit, reveal, a match against every other seat, at the policy's margin over
        today's gas price) would stake, then lose the stake to a deadline or a dispute clock it
        cannot pay to meet."""
        w3 = self.v.chain.w3
        have = w3.eth.get_balance(self.me.address)
        gas = math.ceil(honest_gas(terms) * w3.eth.gas_price * self.policy.gas_price_margin)
        need = terms[STAKE] + gas
        if have < need:
            raise CannotAffordStake(
                f"{self.me.address} has {have / 1e18:.6f} ETH; job {self.jid} needs a stake of {terms[STAKE] / 1e18} "
                f"ETH plus {gas / 1e18:.6f} ETH for the gas of its moves (its commit and reveal, and a match against "
                f"each of the {terms[MAX_TRAINERS] - 1} other seats, at {self.policy.gas_price_margin:g}x today's gas "
                f"price), {need / 1e18:.6f} ETH in all, so it did not join: with less, a cheater's dispute could "
                "outlast its funds and its stake would be lost",
                "fund this account, or run the agent with a key that holds the stake and the gas")

    def _check_disk(self, terms):
        """Refuse before staking on a disk that cannot hold the job's checkpoints."""
        where = self.trainer.store.dir
        why = self.policy.disk_refusal(terms, self.trainer.checkpoint_bytes, shutil.disk_usage(where).free, where)
        if why:
            raise NotEnoughDisk(f"job {self.jid} could stop this agent mid-job for want of disk, so it did not join: "
                                f"{why}", "free space on that disk, or run the agent with --workdir on a larger one")

    def _play(self, terms):
        """Keep the job moving until it settles: open the match the registry asks for if
        nobody has (colluders asked to play each other may never open theirs), move in it if
        it is this agent's, and claim its timeout (anyone may). It is the job's one live match:
        the game opens no other pair."""
        game = self.v.game
        (a, b), m = self.v.requested_match(self.jid)
        mine = self.me.address in (a, b)
        if not m:
            if self._acts("open"):
                self._try("open the match the job needs" + ("" if mine else
                                                             f" ({a[:10]}… vs {b[:10]}…, not this agent's)"),
                          game.functions.open(self.jid, a, b))
            return
        st = self.v.match_state(m)
        phase = st["phase"]
        if phase == PHASE_DONE:
            return
        if mine:
            left = self.v.clocks(m)[0][(a, b).index(self.me.address)]  # the seats are the pair's order
            if left < terms[CLOCK] // 4:
                self._once(f"clock-{m}", f"FALLING BEHIND in match {m}: {left} s left on its clock of "
                           f"{terms[CLOCK]} s; if it runs out, its stake of {terms[STAKE] / 1e18} ETH is lost")
        if mine and self._acts("play"):
            if self.trainer.behaviour.garbles():
                from .garbler import garble
                self.garbled += garble(self.v, m, self.me, self._rng)
            where = (phase, self.v.operator_state(m)["phase"] if phase == PHASE_OPERATOR else 0)
            if where != getattr(self, "_where", None):
                self._where = where
                log.info("%s: match %d: %s%s", self.name, m, PHASE_NAMES[phase],
                         f", {OP_PHASE_NAMES[where[1]]}" if where[1] else "")
            self.v.move(m, self.trainer, self.me, self.ctx)
        referee = self.v.operators if phase == PHASE_OPERATOR else game  # a party may be silent
        if self._acts("timeout"):
            self._try(f"claim a timeout in match {m}", referee.functions.timeout(m))

    def doing(self) -> str:
        """What this agent waits for now, in words (its heartbeat)."""
        if self.jid is None:
            return "waiting for its job to be posted"
        j = self.v.status(self.jid)
        status, terms, now = j[2], j[4], self.v.chain.now()
        _, out, sealed, claim = self._seat()
        if status == SETTLED:
            h = self.v.hold(self.jid, self.me.address)
            if not h.amount:
                return f"job {self.jid} settled"
            if h.due:
                return f"answering the client's delivery challenge (due in {h.due - now} s)"
            return (f"job {self.jid} settled; its {h.amount / 1e18} ETH are held for delivery for "
                    f"{max(0, j[SETTLED_AT] + self.delivery_window_s - now)} s more (the client may release "
                    "them sooner)")
        if status == DISPUTED:
            (a, b), _ = self.v.requested_match(self.jid)
            mine = "its own" if self.me.address in (a, b) else "another pair's"
            return f"job {self.jid} disputed: {mine} match ({a[:10]}… vs {b[:10]}…) is in play" + \
                (" (this agent is out)" if out else "")
        if sealed != bytes(32) and claim == bytes(32) and now < terms[COMMIT_BY]:
            return (f"committed; the reveal window opens once every seat has committed, or in "
                    f"{terms[COMMIT_BY] - now} s")
        if claim != bytes(32) and now < terms[REVEAL_BY]:
            return f"revealed; settlement opens once every seat has revealed, or in {terms[REVEAL_BY] - now} s"
        from .watcher import utc
        return f"job {self.jid} open; chain time {utc(now)}"

    def at_risk(self) -> str | None:
        """What this agent leaves at stake if it stops now and by when it must be back (said
        when it is stopped: SIGTERM, Ctrl-C), or None when nothing is at stake."""
        from .watcher import utc
        if self.jid is None:
            return None
        j = self.v.status(self.jid)
        status, terms, now = j[2], j[4], self.v.chain.now()
        joined, out, sealed, claim = self._seat()
        stake = f"its stake of {terms[STAKE] / 1e18} ETH in job {self.jid}"

        def by(t):
            return f"{utc(t)} (in {max(0, t - now)} s)"
        back = "restart it with the same --workdir (its checkpoints and salt are there)"
        if not joined or out:
            return None
        if status == OPEN and sealed == bytes(32) and now < terms[COMMIT_BY]:
            return f"{stake} waits for its commitment: {back} before the commit deadline {by(terms[COMMIT_BY])}"
        if status == OPEN and claim == bytes(32) and sealed != bytes(32) and now < terms[REVEAL_BY]:
            return f"{stake} is committed and not revealed: {back} before the reveal deadline {by(terms[REVEAL_BY])}"
        if status == OPEN and claim != bytes(32):
            # (a match may start before the reveal deadline: settle opens once every seat has revealed)
            start = "may start now" if self.v.settle_open(self.jid, terms, now) else \
                f"may start once every seat has revealed, {by(terms[REVEAL_BY])} at the latest,"
            return (f"{stake}: its result is revealed; if another trainer's differs, a match {start} and this agent "
                    f"must play it within its dispute clock of {terms[CLOCK]} s from then: {back}")
        if status == DISPUTED:
            (a, b), m = self.v.requested_match(self.jid)
            if self.me.address in (a, b) and m:
                left = self.v.clocks(m)[0][(a, b).index(self.me.address)]
                return f"{stake}: its match {m} is in play with {left} s left on its clock: {back} before it runs out"
            return f"{stake}: the job is disputed and this agent may be asked to play next: {back}"
        if status == SETTLED:
            h = self.v.hold(self.jid, self.me.address)
            if h.due:
                return (f"its held pay of {h.amount / 1e18} ETH in job {self.jid}: a delivery challenge is due by "
                        f"{by(h.due)}: {back}")
        return None

    def _acts(self, move: str) -> bool:
        """An adversary's agent may skip a move (tests); an honest one makes every move."""
        return self.trainer.behaviour.acts(move)

    def run(self, poll_s: float = 0.5, max_s: float | None = None, offline_s: float = 600,
            heartbeat_s: float = 30):
        """Tick until done. A node that goes away (restarted, network down) is waited for,
        up to `offline_s`: nothing is lost meanwhile (the chain keeps the seat and the
        clocks, this agent its checkpoints and salt), and the next tick carries on. While
        it waits it says what for, every `heartbeat_s`. Any other exception in a tick is
        logged and the tick retried (`_failed`): an agent that stopped mid-job would lose its
        stake by timeout. Only a decision not to stake (`REFUSALS`, before joining), a node
        gone for good (NodeGone), KeyboardInterrupt and SystemExit end it."""
        t0, down_since, beat, failures = time.time(), None, time.time(), 0
        while True:
            wait = poll_s
            try:
                if down_since is not None:
                    self._check_deployment()
                if self.tick():
                    break
                if time.time() - beat >= heartbeat_s:
                    beat = time.time()
                    log.info("%s: %s", self.name, self.doing())
                if down_since is not None:
                    log.info("%s: the node is back after %.0f s; carrying on", self.name, time.time() - down_since)
                    down_since = None
                failures = 0
            except (ChainUnavailable, OSError) as e:
                if down_since is None:
                    down_since = time.time()
                    log.warning("%s: lost the node (%s); retrying for up to %.0f s", self.name,
                                str(e).splitlines()[0][:200], offline_s)
                elif time.time() - down_since > offline_s and not self._node_answers():
                    raise NodeGone(f"the node did not answer for {offline_s:.0f} s",
                                   "restart it (with its state: anvil --state FILE), then restart this agent; "
                                   "its checkpoints and salt are kept") from None
                wait = min(2.0, 4 * poll_s)
            except NodeGone:
                raise
            except Exception as e:
                failures += 1
                wait = self._failed(e, failures, poll_s)
            if max_s is not None and time.time() - t0 > max_s:
                raise TimeoutError(f"{self.name}: job {self.jid} not finished after {max_s} s")
            time.sleep(wait)
        log.info("%s: job %d done", self.name, self.jid)

    def _failed(self, e: Exception, failures: int, poll_s: float) -> float:
        """A tick raised `e`, the `failures`-th time in a row. Before joining, a decision not
        to stake ends the agent (re-raised). Anything else is logged, with its traceback the
        first time each distinct error occurs, and retried: the chain keeps the seat and the
        clocks, so a later tick may succeed (a prover or a node that failed once, a bug the
        operator fixes and restarts for). -> seconds to wait before the next try (doubling up
        to RETRY_MAX_S, far inside any dispute clock)."""
        joined = self._joined()
        if isinstance(e, REFUSALS) and not joined:
            raise e
        wait = min(RETRY_MAX_S, poll_s * 2 ** failures)
        what = type(e).__name__ + (f": {str(e).splitlines()[0][:300]}" if str(e) else "")
        frame = e.__traceback__
        while frame is not None and frame.tb_next is not None:
            frame = frame.tb_next
        key = f"failed-{what}-{frame.tb_frame.f_code.co_filename}:{frame.tb_lineno}" if frame else f"failed-{what}"
        if key in self._said:
            log.warning("%s: the tick failed again (%d in a row): %s; retrying in %.1f s", self.name, failures, what,
                        wait)
            return wait
        self._said.add(key)
        log.error("%s: the tick failed: %s; retrying in %.1f s", self.name, what, wait, exc_info=e)
        if joined:
            log.error("%s: A STAKE MAY BE AT RISK in job %s: the agent keeps retrying after %s, but if this keeps "
                      "failing past a deadline or its dispute clock, its stake is lost; look at the traceback above, "
                      "fix the cause and restart the agent (its checkpoints and salt are kept)", self.name, self.jid,
                      what)
        return wait

    def _joined(self) -> bool:
        """Whether this agent has staked in its job; when the chain cannot say, it has (the safe
        side: retry rather than stop)."""
        if self.jid is None:
            return False
        try:
            return bool(self._seat()[0])
        except Exception:
            return True

    def _node_answers(self) -> bool:
        """Whether the node answers a read now. Only a node that does not is gone: one that
        answers but leaves a transaction unmined (a fee spike, full blocks) is the chain
        client's to handle (it replaces the transaction at the same nonce with higher fees)."""
        try:
            self.v.chain.w3.eth.block_number
            return True
        except Exception:
            return False

    def _check_deployment(self):
        """After an outage: a node that came back without its state (a restarted Anvil with
        no --state) has no contracts, and waiting would never end."""
        if not self.v.chain.w3.eth.get_code(self.v.registry.address):
            raise NodeGone(f"the node came back without the contracts (no code at {self.v.registry.address}): "
                           "its chain was reset", "restart the node with its saved state (anvil --state FILE)")
