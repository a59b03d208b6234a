"""The Verde contracts from Python: deploy the game and the registry, post a job from a
job file, and the trainer's moves (join, commit, reveal, dispute moves). One place, used
by the agents, the CLI and the tests."""
from __future__ import annotations

import os
from dataclasses import dataclass

from web3.logs import DISCARD

from ..protocol.claims import seal
from .client import Chain


@dataclass
class Verde:
    chain: Chain
    registry: object
    game: object

    @classmethod
    def deploy(cls, chain: Chain) -> "Verde":
        game = chain.deploy("DisputeGame")
        registry = chain.deploy("JobRegistry", game.address)
        chain.transact(game.functions.setRegistry(registry.address))
        return cls(chain, registry, game)

    # -- the client ---------------------------------------------------------------------------
    def post(self, job, ctx, payment: int, stake: int, max_trainers: int = 3, join_s: int = 600,
             commit_s: int = 1200, reveal_s: int = 1800, clock_s: int = 3600, client=None) -> int:
        """Post a job: its commitments come from the job alone (the referee's context)."""
        now = self.chain.now()
        spec = job.spec
        terms = (job.job_id, ctx.graph.root, ctx.initial_claim, ctx.data_root, spec.steps, spec.fanout, spec.chunk,
                 max_trainers, stake, now + join_s, now + commit_s, now + reveal_s, clock_s)
        fn = self.registry.functions.post(terms)
        receipt = self.chain.transact(fn, sender=client, value=payment)
        ev = self.registry.events.JobPosted().process_receipt(receipt, errors=DISCARD)
        return ev[0]["args"]["id"]

    # -- a trainer ------------------------------------------------------------------------------
    def join_and_commit(self, job_id: int, spec_hash: bytes, claim: bytes, stake: int, account,
                        salt: bytes | None = None) -> bytes:
        salt = salt or os.urandom(32)
        self.chain.transact(self.registry.functions.join(job_id), sender=account, value=stake)
        sealed = seal(spec_hash, account.address, claim, salt)
        self.chain.transact(self.registry.functions.commit(job_id, sealed), sender=account)
        return salt

    def reveal(self, job_id: int, claim: bytes, salt: bytes, account):
        return self.chain.transact(self.registry.functions.reveal(job_id, claim, salt), sender=account)

    def settle(self, job_id: int):
        return self.chain.transact(self.registry.functions.settle(job_id))

    def status(self, job_id: int):
        return self.chain.call(self.registry.functions.job(job_id))

    def owed(self, address: str) -> int:
        return self.chain.call(self.registry.functions.owed(address))

    # -- the dispute game -----------------------------------------------------------------------
    def open_match(self, job_id: int, a: str, b: str) -> int:
        receipt = self.chain.transact(self.game.functions.open(job_id, a, b))
        return self.game.events.MatchOpened().process_receipt(receipt, errors=DISCARD)[0]["args"]["id"]

    def match_state(self, match_id: int) -> dict:
        phase, lo, hi, left, waiting = self.chain.call(self.game.functions.state(match_id))
        return {"phase": phase, "lo": lo, "hi": hi, "clock_left": list(left), "waiting": waiting}

    def move(self, match_id: int, trainer, account) -> bool:
        """One move of the trainer in the current phase, answered from its trainer library
        through its behaviour (an agent's job). -> False when it stays silent."""
        from ..dispute.party import InProcess, Silence
        st = self.match_state(match_id)
        if not st["waiting"] & (1 << self._seat(match_id, account.address)):
            return True
        ep = InProcess(trainer)
        try:
            if st["phase"] == PHASE_STEPS:
                points = self.chain.call(self.game.functions.roundPoints(match_id))
                claims = ep.claim_at(list(points))
                self.chain.transact(self.game.functions.postClaims(match_id, claims), sender=account)
            elif st["phase"] == PHASE_OPEN:
                s1, r1 = ep.open_claim(st["lo"] + 1)
                s0, r0 = ep.open_claim(st["lo"]) if st["lo"] else (bytes(32), bytes(32))
                self.chain.transact(self.game.functions.openStep(match_id, s1, r1, s0, r0), sender=account)
            else:
                return True
        except Silence:
            return False
        return True

    def _seat(self, match_id: int, address: str) -> int:
        return list(self.chain.call(self.game.functions.parties(match_id))).index(address)


PHASE_STEPS, PHASE_OPEN, PHASE_NODES, PHASE_DONE = 1, 2, 3, 4
