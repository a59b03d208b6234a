"""The Verde contracts from Python: deploy the game and the registry, post a job from a
job file, and the trainer's moves (join, commit, reveal, dispute moves). One place, used
by the agents, the CLI and the tests."""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

from web3.logs import DISCARD

from ..protocol.claims import seal
from .client import Chain
from .errors import ChainError, DeploymentError, TransactionReverted


class NotSettleableOnChain(ChainError):
    """The job's decomposition has an operand the on-chain referee cannot place."""


class AlreadyComputed(ChainError):
    """A claim of this job spec was revealed in an earlier job: a repost could be paid for a
    replayed result (JobRegistry.SpecRevealedBefore)."""


@dataclass(frozen=True)
class Floors:
    """The least a job's terms may give a trainer, fixed in JobRegistry at deployment: a
    client cannot post a clock or a window an honest trainer cannot meet. A real network's
    deployment wants hours; these defaults suit a local chain whose clock is moved."""
    clock_s: int = 600
    commit_window_s: int = 300
    reveal_window_s: int = 300


ANSWER_GAS_PER_CHUNK = 700_000  # an answer's gas per chunk at MAX_CHUNK int64 elements (16 KiB), EIP-7623's floor
BOND_GAS_PRICE = 10 * 10**9  # wei per gas the default bond is sized for (10 gwei)
ANSWER_BYTES = 64 * 1024  # chunk bytes per answer transaction: with its proofs, under 100 KB of calldata


@dataclass(frozen=True)
class Delivery:
    """The client's remedy against an accepted trainer that does not deliver, fixed in
    JobRegistry at deployment: for window_s after settlement the accepted trainers' stakes
    and shares are held, and the client may challenge one of them to put ranges of chunks of
    the result on chain, each range within answer_s of the one before (or the held amount is
    the client's), paying bond_wei per chunk (the trainer's for each chunk answered: its gas);
    the client releases early once it has its model. window_s 0: paid at settlement, no
    remedy. docs/PROTOCOL.md §6."""
    window_s: int = 0
    answer_s: int = 300
    bond_wei: int = ANSWER_GAS_PER_CHUNK * BOND_GAS_PRICE


@dataclass(frozen=True)
class Ask:
    """One delivery challenge (JobRegistry.asks): chunks first .. first + count - 1 of a state tensor."""
    tensor: int
    first: int
    count: int
    due: int


@dataclass(frozen=True)
class Hold:
    """An accepted trainer's held stake and share (JobRegistry.holds), and its oldest open
    challenge (`open`, None when every one is answered)."""
    amount: int
    asked: int  # challenges so far
    answered: int  # challenges answered in full (the next is asks[answered])
    done: int  # chunks of the next one answered
    pending: int  # chunks asked and not yet answered, over every challenge
    open: Ask | None = None

    @property
    def due(self) -> int:
        """The oldest open challenge's deadline, 0 when none is open."""
        return self.open.due if self.open else 0


@dataclass
class Verde:
    chain: Chain
    registry: object
    game: object
    operators: object
    from_block: int = 0  # the deployment's first block: event scans start there, not at genesis
    created: dict = field(default_factory=dict)  # role -> the hash of the transaction that created it
    verified: bool = field(default=False, repr=False, compare=False)  # check_deployment passed (attach, deploy)

    @classmethod
    def attach(cls, chain: Chain, deployment: dict) -> "Verde":
        """The contracts of an earlier `deploy` (its `addresses()`), checked to be Verde's
        before anything is staked in them (chain/integrity.py: the code, the immutables, the
        wiring and the creating transactions): a deployment file may come from a client that
        deployed a registry whose disputes it decides itself."""
        from .integrity import check_deployment
        if deployment.get("chain_id") != chain.chain_id:
            raise DeploymentError(f"the deployment is for chain id {deployment.get('chain_id')}, this node is "
                                  f"chain id {chain.chain_id}", "pass the deployment file written for this chain")
        check_deployment(chain, deployment)
        out = {name: chain.w3.eth.contract(address=chain.w3.to_checksum_address(deployment[name]),
                                           abi=chain.artifacts[contract].abi)
               for name, contract in (("registry", "JobRegistry"), ("game", "DisputeGame"),
                                      ("operators", "OperatorGame"))}
        return cls(chain, **out, from_block=int(deployment.get("from_block", 0)),
                   created=dict(deployment.get("created") or {}), verified=True)

    def verify(self) -> None:
        """Raise DeploymentError unless these are Verde's contracts, wired to each other
        (chain/integrity.py); once: attach and deploy have. An agent calls it before it
        stakes, whoever built this Verde."""
        if not self.verified:
            from .integrity import check_deployment
            check_deployment(self.chain, self.addresses())
            self.verified = True

    def addresses(self) -> dict:
        return {"chain_id": self.chain.chain_id, "registry": self.registry.address, "game": self.game.address,
                "operators": self.operators.address, "from_block": self.from_block, "created": self.created}

    @classmethod
    def deploy(cls, chain: Chain, floors: Floors = Floors(), delivery: Delivery = Delivery()) -> "Verde":
        first = chain.w3.eth.block_number + 1
        game, made_game = chain.create("DisputeGame")
        operators, made_operators = chain.create("OperatorGame", game.address, chain.deploy("Executor").address)
        registry, made_registry = chain.create(
            "JobRegistry", game.address, floors.clock_s, floors.commit_window_s, floors.reveal_window_s,
            delivery.window_s, delivery.answer_s, delivery.bond_wei)
        chain.transact(game.functions.setUp(registry.address, operators.address))
        created = {role: "0x" + bytes(r["transactionHash"]).hex() for role, r in
                   (("registry", made_registry), ("game", made_game), ("operators", made_operators))}
        return cls(chain, registry, game, operators, first, created, verified=True)

    # -- the client ---------------------------------------------------------------------------
    def floors(self) -> Floors:
        r = self.registry.functions
        return Floors(*(self.chain.call(f()) for f in (r.minClock, r.minCommitWindow, r.minRevealWindow)))

    def delivery(self) -> Delivery:
        r = self.registry.functions
        return Delivery(*(self.chain.call(f()) for f in (r.deliveryWindow, r.answerWindow, r.bond)))

    def hold(self, job_id: int, trainer: str) -> Hold:
        r = self.registry.functions
        amount, asked, answered, done, pending = self.chain.call(r.holds(job_id, trainer))
        head = Ask(*self.chain.call(r.asks(job_id, trainer, answered))) if answered < asked else None
        return Hold(amount, asked, answered, done, pending, head)

    def challenge(self, job_id: int, trainer: str, tensor: int, first: int, client, count: int = 1):
        """The client asks `trainer` for chunks first .. first + count - 1 (at most MAX_RANGE) of
        state tensor `tensor` on chain, with the deployment's bond per chunk."""
        bond = self.chain.call(self.registry.functions.bond())
        return self.chain.transact(self.registry.functions.challenge(job_id, trainer, tensor, first, count),
                                   sender=client, value=count * bond)

    def challenge_chunks(self, job_id: int, trainer: str, chunks: dict, client) -> int:
        """Challenge every chunk in {tensor: [chunk index, ...]}, in ranges of consecutive
        chunks of at most MAX_RANGE. -> the number of challenges sent."""
        most, sent = self.chain.call(self.registry.functions.MAX_RANGE()), 0
        for tensor, indices in sorted(chunks.items()):
            for first, count in ranges(sorted(set(indices)), most):
                self.challenge(job_id, trainer, tensor, first, client, count)
                sent += 1
        return sent

    def answer(self, job_id: int, trainer: str, proof, account):
        """Answer the oldest open challenge with a delivery.ChunkProof (its next chunks, in
        order; anyone holding the result may)."""
        return self.chain.transact(self.registry.functions.answer(job_id, trainer, self.answer_arg(proof)),
                                   sender=account)

    def answer_challenges(self, job_id: int, trainer: str, store, claim: bytes, account) -> int:
        """Answer every open challenge of `trainer` from a published result store, in order,
        each transaction carrying as many chunks as fit ANSWER_BYTES. -> chunks answered."""
        from ..protocol.delivery import prove_from_store
        sent = 0
        while (h := self.hold(job_id, trainer)).open is not None:
            a = h.open
            proof = prove_from_store(store, claim, a.tensor, a.first + h.done, a.count - h.done, ANSWER_BYTES)
            self.answer(job_id, trainer, proof, account)
            sent += len(proof.chunks)
        return sent

    @staticmethod
    def answer_arg(p) -> tuple:
        """A delivery.ChunkProof as the registry's Delivered."""
        return (p.state_root, p.trace_root, p.commitment, [bytes(x) for x in p.state_proof],
                [_proof_tuple(c) for c in p.chunks])

    def close(self, job_id: int, trainer: str, account):
        """End `trainer`'s hold: paid (client at any time, anyone after the window) or, after
        an unanswered challenge, refunded to the client."""
        return self.chain.transact(self.registry.functions.close(job_id, trainer), sender=account)

    def post(self, job, ctx, payment: int, stake: int, max_trainers: int = 3, join_s: int = 600,
             commit_s: int = 1200, reveal_s: int = 1800, clock_s: int = 3600, client=None,
             only: list[str] | None = None) -> int:
        """Post a job: its commitments come from the job alone (the referee's context). Refused
        first, as every agent would refuse it: data holding an index a later step cannot use
        (datacheck), a node the chain cannot settle (check_settleable).
        only: the addresses that may join (JobRegistry.postFor), or None for anyone."""
        from ..protocol import datacheck
        self.check_new(job)
        datacheck.check(job)
        check_settleable(ctx)
        committed = commitments(job, ctx)  # (before the clock is read: a large job's roots take time)
        # the time the post's block will have: the latest block's can be minutes old on a quiet local
        # chain (Anvil mines on demand), and deadlines from it had passed in part when the post was mined
        now = max(self.chain.now(), int(time.time()))
        terms = (*committed, max_trainers, stake, now + join_s, now + commit_s, now + reveal_s, clock_s)
        self._check_floors(join_s, commit_s, reveal_s, clock_s)
        fn = self.registry.functions.postFor(terms, list(only)) if only else self.registry.functions.post(terms)
        receipt = self.chain.transact(fn, sender=client, value=payment)
        ev = self.registry.events.JobPosted().process_receipt(receipt, errors=DISCARD)
        return ev[0]["args"]["id"]

    def check_new(self, job):
        """The registry refuses a spec whose claim was revealed in an earlier job: say so before
        sending, with that job and what to do instead."""
        earlier = self.chain.call(self.registry.functions.revealedIn(job.job_id))
        if not earlier:
            return
        fetch = f"fetch job {earlier}'s result (verde fetch {earlier} JOB --from STORE)"
        raise AlreadyComputed(
            f"job {job.job_id.hex()[:16]}… was computed before on this registry: a result of it was revealed in job "
            f"{earlier}, so it is public, and a trainer could be paid here for replaying it without training "
            "(docs/PROTOCOL.md §6); the registry refuses to post it again",
            f"{fetch}: an inference job on the same program and inputs is the same computation" if job.spec.inference
            else f"{fetch}, or change data.seed in the job file so that the batches, and the result, differ")

    def _check_floors(self, join_s, commit_s, reveal_s, clock_s):
        """The registry would revert with BelowFloor; say it before sending, in seconds."""
        f = self.floors()
        for what, got, floor, flag in (("dispute clock", clock_s, f.clock_s, "--clock-s"),
                                       ("commit window (after the join deadline)", commit_s - join_s,
                                        f.commit_window_s, "--train-s"),
                                       ("reveal window", reveal_s - commit_s, f.reveal_window_s, "--reveal-s")):
            if got < floor:
                raise ChainError(f"the {what} is {got} s; this deployment's JobRegistry accepts no less than "
                                 f"{floor} s (a trainer could not meet it)", f"pass {flag} {floor} or more")

    # -- a trainer ------------------------------------------------------------------------------
    def join_and_commit(self, job_id: int, spec_hash: bytes, claim: bytes, stake: int, account,
                        salt: bytes | None = None) -> bytes:
        salt = salt or os.urandom(32)
        self.chain.transact(self.registry.functions.join(job_id), sender=account, value=stake)
        sealed = seal(spec_hash, account.address, claim, salt)
        self.chain.transact(self.registry.functions.commit(job_id, sealed), sender=account)
        return salt

    def reveal(self, job_id: int, claim: bytes, salt: bytes, account, opened: tuple | None = None, steps: int = 0):
        """Reveal a sealed claim; a fault claim (docs/PROTOCOL.md §6) with revealFault, its step
        and trace root read off its opening `opened` = (S, R) of point `steps` (the trainer's
        open_claim(T)), so the registry can settle it as a fault."""
        return self.chain.transact(self.reveal_call(job_id, claim, salt, opened, steps), sender=account)

    def reveal_call(self, job_id: int, claim: bytes, salt: bytes, opened: tuple | None = None, steps: int = 0):
        from ..protocol.claims import fault_state, step_claim
        r = self.registry.functions
        if opened is not None and step_claim(*opened) == claim:
            step = next((s for s in range(steps) if fault_state(s) == opened[0]), None)
            if step is not None:
                return r.revealFault(job_id, step, opened[1], salt)
        return r.reveal(job_id, claim, salt)

    def settle(self, job_id: int):
        return self.chain.transact(self.registry.functions.settle(job_id))

    def status(self, job_id: int):
        return self.chain.call(self.registry.functions.job(job_id))

    def reveal_open(self, job_id: int, terms, now: int) -> bool:
        """Is the reveal window open? From the commit deadline, or sooner once every seat that can
        be taken is sealed (JobRegistry.everyoneCommitted: nobody can seal a copy any more), to the
        reveal deadline. (The registry is asked only inside the commit window.)"""
        if now >= terms[REVEAL_BY]:
            return False
        return now >= terms[COMMIT_BY] or self.chain.call(self.registry.functions.everyoneCommitted(job_id))

    def settle_open(self, job_id: int, terms, now: int) -> bool:
        """May the job settle? From the reveal deadline, or sooner once every seat that can be
        taken has revealed (JobRegistry.everyoneRevealed)."""
        return now >= terms[REVEAL_BY] or self.chain.call(self.registry.functions.everyoneRevealed(job_id))

    def accepted_fault(self, job_id: int) -> dict | None:
        """The FaultAccepted event's (step, paid, refunded) when the job settled on a fault claim."""
        logs = self.registry.events.FaultAccepted().get_logs(from_block=self.from_block, argument_filters={"id": job_id})
        return dict(logs[0]["args"]) if logs else None

    def owed(self, address: str) -> int:
        return self.chain.call(self.registry.functions.owed(address))

    def deliver(self, job, ctx, seats, payment: int, stake: int, client) -> tuple[int, dict]:
        """Post the job and let each (account, trainer) join, commit and reveal its final
        claim, moving the local chain's clock past each deadline; then settle.
        -> (job id, settle receipt)."""
        jid = self.post(job, ctx, payment, stake, client=client)
        salts = {a.address: self.join_and_commit(jid, job.job_id, t.final_claim(), stake, a) for a, t in seats}
        self.chain.advance(1300)
        for a, t in seats:
            self.reveal(jid, t.final_claim(), salts[a.address], a, t.open_claim(t.steps), t.steps)
        self.chain.advance(600)
        return jid, self.settle(jid)

    def play(self, match_id: int, seats, ctx, max_rounds: int = 80, until=None) -> int:
        """Both parties move until the match is decided (or reaches a phase in `until`); a
        party that does not move has its clock run out (the chain's clock is moved). A
        decision leaves the job open for `settle`, which is sent then (as agents do).
        -> the final phase."""
        until = until or (PHASE_DONE,)
        for _ in range(max_rounds):
            if self.match_state(match_id)["phase"] in until:
                break
            moved = [self.move(match_id, t, a, ctx) for a, t in seats]
            phase = self.match_state(match_id)["phase"]
            if not all(moved) and phase not in until:
                self.chain.advance(3601)
                referee = self.operators if phase == PHASE_OPERATOR else self.game
                self.chain.transact(referee.functions.timeout(match_id))
        phase = self.match_state(match_id)["phase"]
        if phase == PHASE_DONE:
            self.settle_decided(match_id)
        return phase

    def settle_decided(self, match_id: int):
        """Settle the job of a decided match if nobody has yet (its decision leaves the job open
        for `settle`: accept, or ask for the next match). -> the settle receipt, or None."""
        opened = self.game.events.MatchOpened().get_logs(from_block=self.from_block, argument_filters={"id": match_id})
        job_id = opened[0]["args"]["job"]
        if self.status(job_id)[2] != JOB_OPEN:
            return None
        return self.settle(job_id)

    def settle_disputes(self, job_id: int, seats, ctx, max_rounds: int = 300) -> list[dict]:
        """Play every match the registry asks for (while the job is Disputed: after settle, and
        after the settle that follows each decision) until it asks for none. -> per match its
        decision (`decision`), its id and the gas log of its transactions (its settle's too)."""
        by_addr = {a.address: (a, t) for a, t in seats}
        out = []
        while self.status(job_id)[2] == JOB_DISPUTED:
            (a, b), m = self.requested_match(job_id)
            mark = len(self.chain.gas_log)
            m = m or self.open_match(job_id, a, b)
            self.play(m, [by_addr[a], by_addr[b]], ctx, max_rounds)
            d = self.decision(m)
            if d is None:
                raise RuntimeError(f"match {m} was not decided within {max_rounds} rounds")
            out.append({**d, "match": m, "gas": self.chain.gas_log[mark:]})
        return out

    # -- the dispute game -----------------------------------------------------------------------
    def decision(self, match_id: int) -> dict | None:
        """The match's MatchDecided event (winner, loser, level, reason, tx), or None."""
        logs = self.game.events.MatchDecided().get_logs(from_block=self.from_block, argument_filters={"id": match_id})
        return {**logs[-1]["args"], "tx": logs[-1]["transactionHash"]} if logs else None

    def requested_match(self, job_id: int) -> tuple[tuple[str, str], int]:
        """The pair the registry asks to play (lower address first) and its match id (0 while
        nobody opened it): DisputeGame opens only that pair, so it is the job's one live match."""
        from eth_abi import encode
        from web3 import Web3
        a, b = self.chain.call(self.registry.functions.requested(job_id))
        key = Web3.keccak(encode(["uint256", "address", "address"], [job_id, a, b]))
        return (a, b), self.chain.call(self.game.functions.matchOf(key))

    def open_match(self, job_id: int, a: str, b: str) -> int:
        receipt = self.chain.transact(self.game.functions.open(job_id, a, b))
        return self.game.events.MatchOpened().process_receipt(receipt, errors=DISCARD)[0]["args"]["id"]

    def match_state(self, match_id: int) -> dict:
        phase, lo, hi, left, waiting = self.chain.call(self.game.functions.state(match_id))
        return {"phase": phase, "lo": lo, "hi": hi, "clock_left": list(left), "waiting": waiting}

    def move(self, match_id: int, trainer, account, ctx) -> bool:
        """One move of the trainer in the current phase, answered from its trainer library
        through its behaviour (an agent's job). -> False when it stays silent."""
        from ..dispute.party import InProcess, Silence
        st = self.match_state(match_id)
        ep, g, s = InProcess(trainer), self.game.functions, st["lo"]
        send = lambda fn: self.chain.transact(fn, sender=account)  # noqa: E731
        try:
            phase = st["phase"]
            if phase == PHASE_OPERATOR:
                return self._operator_move(match_id, ep, account, ctx, s)
            if not st["waiting"] & (1 << self._seat(match_id, account.address)):
                return True
            if phase == PHASE_STEPS:
                send(g.postClaims(match_id, ep.claim_at(list(self.chain.call(g.roundPoints(match_id)))),
                                  list(self._theirs(self.game.events.ClaimsPosted, "claims", match_id, account,
                                                    st["waiting"]))))
            elif phase == PHASE_OPEN:
                send(g.openStep(match_id, *ep.open_claim(s + 1), *ep.open_claim(s)))
            elif phase == PHASE_STATE_LEAF:
                _, k = self._descent(match_id)
                send(g.postStateLeaf(match_id, ep.state_leaves(s + 1)[k]))
            elif phase == PHASE_STATE_SOURCE:
                send(g.resolveState(match_id, *self._state_source(match_id, ep, ctx, s)))
            elif phase == PHASE_TOPS and (t := self._earlier_fault(trainer, ep, s)) is not None:
                send(g.showEarlierFault(match_id, t))
            elif phase == PHASE_TOPS:
                from ..protocol import merkle
                node, n = self._tree_of(match_id, ep, ctx, s)
                send(g.postTop(match_id, node(merkle.depth(n), 0)))
            elif phase == PHASE_DESCENT:
                node, _ = self._tree_of(match_id, ep, ctx, s)
                h, i = self._descent(match_id)
                send(g.postChildren(match_id, *self._below(self.game, match_id, account, st["waiting"], node, h, i)))
            elif phase == PHASE_FAULT_NODE or (phase == PHASE_NODE and ep.trace_node(s, 0, self._descent(match_id)[1])
                                                == bytes(32)):  # its run faulted before: show where
                send(g.showFault(match_id, *ep.fault_node(s)))
            elif phase == PHASE_NODE:
                _, j = self._descent(match_id)
                enc, _ = ep.node(s, j)
                send(g.postNode(match_id, enc, ep.node_structure(s, j), ctx.graph.tree.proof(j),
                                self._theirs(self.game.events.NodePosted, "node", match_id, account, st["waiting"],
                                             b"")))
            elif phase == PHASE_INPUT_SOURCE:
                send(g.resolveInput(match_id, *self._input_source(match_id, ep, ctx, s)))
            else:
                return True
        except Silence:
            return False
        except TransactionReverted:
            return False  # a move the game refused: the party still owes one
        return True

    @staticmethod
    def _earlier_fault(trainer, ep, s: int) -> int | None:
        """The step t < s at which the trainer's run faulted, when its claim at s + 1 repeats its
        fault claim at s (DisputeGame.showEarlierFault); else None."""
        t = getattr(trainer, "fault_step", None)
        if t is None or t >= s:
            return None
        lo, hi = ep.claim_at([s, s + 1])
        return t if lo == hi else None

    # -- levels 3-5 (OperatorGame) ----------------------------------------------------------------
    def operator_state(self, match_id: int) -> dict:
        phase, node, kernel, operand, flat, waiting = self.chain.call(self.operators.functions.state(match_id))
        left = list(self.chain.call(self.operators.functions.clocks(match_id)))
        return {"phase": phase, "node": node, "kernel": kernel, "operand": operand, "flat": flat, "waiting": waiting,
                "clock_left": left}

    def clocks(self, match_id: int) -> tuple[list, int]:
        """(seconds left per seat, who is waited for as a 2-bit mask) wherever the match is:
        the clocks carry over into OperatorGame at level 3."""
        st = self.match_state(match_id)
        if st["phase"] == PHASE_OPERATOR:
            st = self.operator_state(match_id)
        return st["clock_left"], st["waiting"]

    def _operator_move(self, match_id, ep, account, ctx, s) -> bool:
        from ..protocol import merkle
        from ..dispute import level5_primitive
        from ..dispute.oprun import decode_kernel, element_of, operand_shape
        from ..protocol.tensors import chunk_count, parse_header
        st = self.operator_state(match_id)
        phase, j, k = st["phase"], st["node"], st["kernel"]
        if phase in (OP_NONE, OP_DONE) or not st["waiting"] & (1 << self._seat(match_id, account.address)):
            return True
        g = self.operators.functions
        send = lambda fn: self.chain.transact(fn, sender=account)  # noqa: E731
        which = ("operand", st["operand"]) if st["operand"] >= 0 else ("output",)
        height, index, chunks = self.chain.call(g.descent(match_id))
        if phase in (OP_SOURCE, OP_STEP):  # kernel k's structure is agreed: the job's
            structure = ctx.kernel_graph.structures[j][k]
            name, descs, operands, _ = decode_kernel(ep.kernel(s, j, k))
        if phase == OP_TOPS:
            count, root, proof = ctx.kernel_graph.node_leaf(j)
            send(g.postKernelTop(match_id, ep.kernel_node(s, j, merkle.depth(count), 0), count, root, proof))
        elif phase == OP_DESCENT:
            node = ((lambda h, i: ep.tensor_node(s, j, k, which, h, i)) if chunks else
                    (lambda h, i: ep.kernel_node(s, j, h, i)))
            send(g.postChildren(match_id, *self._below(self.operators, match_id, account, st["waiting"], node, height,
                                                       index)))
        elif phase == OP_KERNEL and ep.kernel_node(s, j, 0, k) == bytes(32):  # its node faulted before k: show where
            send(g.showFault(match_id, *ep.fault_kernel(s, j)[1:]))
        elif phase == OP_KERNEL:
            other, other_proof = self._theirs(self.operators.events.KernelPosted, ("kernel", "proof"), match_id,
                                              account, st["waiting"], (b"", []))
            node = ep.node(s, j)[0] if k == ctx.kernel_graph.trees[j].n - 1 else b""  # the result pseudo-kernel's
            # the game reads the other's proof only when the kernel trees agree, and then it has
            # depth(count) hashes; any other (a cheater's padding) is not passed back: it could
            # make this move too large for a real chain
            depth = merkle.depth(ctx.kernel_graph.trees[j].n)
            other_proof = list(other_proof) if len(other_proof) == depth else []
            send(g.postKernel(match_id, ep.kernel(s, j, k), ep.kernel_proof(s, j, k),
                              ctx.kernel_graph.trees[j].proof(k), (other, other_proof), node))
        elif phase == OP_TENSOR_TOP:
            head, _ = ep.tensor_root(s, j, k, which)
            n = chunk_count(parse_header(head)[1], ctx.job.spec.chunk)
            send(g.postTensorTop(match_id, head, ep.tensor_node(s, j, k, which, merkle.depth(n), 0)))
        elif phase == OP_CHUNK:
            mine = ep.element(s, j, k, which, index * ctx.job.spec.chunk).chunk_bytes
            send(g.postChunk(match_id, mine, self._theirs(self.operators.events.ChunkPosted, "chunk", match_id, account,
                                                          st["waiting"], b"")))
        elif phase == OP_SOURCE:
            src = element_of(descs[st["operand"]], st["flat"])
            node, kernel, proof, element = b"", b"", [], _NO_ELEMENT  # a constant's source needs none of them
            if src[0] == "view":
                node = ep.node(s, j)[0]  # its inputs are the op's (either party's node: they agree)
                m = self._inputs(ctx, j)
                if src[1] >= m:
                    kernel, proof = ep.kernel(s, j, src[1] - m), ep.kernel_proof(s, j, src[1] - m)
                element = _proof_tuple(ep.element(s, j, k, ("source", src[1]), src[2]))
            send(g.resolveOperand(match_id, structure, (node, kernel, proof), element))
        elif phase == OP_STEP:
            proofs = []

            def fetch(o, idx):
                p = ep.element(s, j, k, ("operand", o), idx)
                proofs.append(_proof_tuple(p))
                return p.element(), p.code
            level5_primitive.evaluate(name, [operand_shape(d) for d in descs], st["flat"], fetch)
            send(g.resolveStep(match_id, structure, operands, proofs))
        return True

    @staticmethod
    def _inputs(ctx, j: int) -> int:
        from ..protocol.trace import decode_structure
        return len(decode_structure(ctx.graph.structures[j])[2])

    def _tree_of(self, match_id, ep, ctx, s):
        """(node(height, index), leaf count) of the tree the descent runs over: the step's
        trace, or (when the traces agree) the state after it."""
        from ..protocol.dataset import state_tree
        if not self.chain.call(self.game.functions.overState(match_id)):
            return (lambda h, i: ep.trace_node(s, h, i)), len(ctx.graph.structures)
        return state_tree(ep.state_leaves(s + 1)).node, len(ctx.graph.state_refs)

    def _descent(self, match_id: int) -> tuple[int, int]:
        return tuple(self.chain.call(self.game.functions.descent(match_id)))

    def _source(self, ep, ctx, s: int, ref):
        """(source bytes, proof) for a reference: a node of the trace, the state before, or
        the step's batch."""
        from ..protocol.dataset import state_tree
        from ..protocol.trace import DATA, NODE_OUT, STATE
        if ref.kind == NODE_OUT:
            return ep.node(s, ref.index)
        if ref.kind == STATE:
            leaves = ep.state_leaves(s)
            return leaves[ref.index], state_tree(leaves).proof(ref.index)
        if ref.kind == DATA:
            return b"".join(ctx.batch_commitments(s)), ctx.data_tree.proof(s)
        raise ValueError(f"unknown reference kind {ref.kind}")

    def _state_source(self, match_id, ep, ctx, s):
        i = self.chain.call(self.game.functions.pick(match_id))
        ref = ctx.graph.state_refs[i]
        return (ref.encode(), ctx.state_map.proof(i), *self._source(ep, ctx, s, ref))

    def _input_source(self, match_id, ep, ctx, s):
        from ..protocol.trace import decode_structure
        i = self.chain.call(self.game.functions.pick(match_id))
        _, j = self._descent(match_id)
        ref = decode_structure(ctx.graph.structures[j])[2][i]
        return self._source(ep, ctx, s, ref)

    def _below(self, game, match_id: int, account, waiting: int, node, height: int, index: int) -> tuple[list, list]:
        """A descent move's arguments: this party's nodes DESCENT_SPAN levels below its node
        (fewer near the leaves), and, when the other party already moved this round, the
        other's as its ChildrenPosted event holds them (the game keeps only their hash)."""
        k = min(DESCENT_SPAN, height)
        mine = [node(height - k, (index << k) + j) for j in range(1 << k)]
        return mine, list(self._theirs(game.events.ChildrenPosted, "nodes", match_id, account, waiting))

    def _theirs(self, event, field, match_id: int, account, waiting: int, nothing=()):
        """What the other party posted this round, from its event (the game keeps at most its
        hash), when it has moved; else `nothing` (this party moves first). field: an event
        argument's name, or a tuple of them (-> a tuple)."""
        other = 1 - self._seat(match_id, account.address)
        if waiting & (1 << other):
            return nothing
        logs = event().get_logs(from_block=self.from_block, argument_filters={"id": match_id})
        args = [e["args"] for e in logs if e["args"]["party"] == other][-1]
        return tuple(args[f] for f in field) if isinstance(field, tuple) else args[field]

    def _seat(self, match_id: int, address: str) -> int:
        seats = getattr(self, "_seats", None)
        if seats is None:
            seats = self._seats = {}
        if match_id not in seats:  # a match's parties never change
            seats[match_id] = list(self.chain.call(self.game.functions.parties(match_id)))
        return seats[match_id].index(address)


COMMITMENT_NAMES = ("specHash", "graphRoot", "initialClaim", "dataRoot", "stateMapRoot", "kernelRoot", "nodes",
                    "stateTensors", "steps", "fanout", "chunk")
STATE_COUNT = COMMITMENT_NAMES.index("stateTensors")
CHUNK = COMMITMENT_NAMES.index("chunk")
SETTLED_AT = 9  # JobRegistry.Job: client, payment, status, accepted, terms, trainers, pot, restricted, requested, settledAt
# the client's other terms, after the commitments (JobRegistry.Terms field indices)
MAX_TRAINERS, STAKE, JOIN_BY, COMMIT_BY, REVEAL_BY, CLOCK = range(len(COMMITMENT_NAMES), len(COMMITMENT_NAMES) + 6)


def commitments(job, ctx) -> tuple:
    """The job terms that follow from the job file alone (JobRegistry.Terms, first fields):
    what the client commits to, and what a trainer recomputes before it stakes."""
    spec = job.spec
    return (job.job_id, ctx.graph.root, ctx.initial_claim, ctx.data_tree.root, ctx.state_map.root,
            ctx.kernel_graph.root, len(ctx.graph.structures), len(ctx.graph.state_refs), spec.steps, spec.fanout,
            spec.chunk)


MAX_NODE_BYTES = 40_000  # DisputeGame.MAX_NODE: the largest node encoding a party may reveal


def node_bytes(ctx, j: int) -> int:
    """The length of node j's encoding (docs/PROTOCOL.md §4): its inputs are its structure's refs,
    its outputs the operands of its decomposition's result pseudo-kernel (the last)."""
    from ..protocol.trace import decode_structure
    result = ctx.kernel_graph.structures[j][-1]
    at = 5 + int.from_bytes(result[1:5], "big")
    outputs = int.from_bytes(result[at:at + 2], "big")
    return 37 + 32 * (len(decode_structure(ctx.graph.structures[j])[2]) + outputs)


MAX_STRUCTURE_BYTES = 16_000  # a node's structure: postNode carries it beside two nodes of MAX_NODE_BYTES
MAX_KERNEL_BYTES = 24_000  # a kernel's encoding: postKernel carries two of them and, at the result kernel, a node


def kernel_bytes(structure: bytes) -> int:
    """The length of the encoding of a kernel of this structure (docs/PROTOCOL.md §7): the structure
    (tag, name, operand descriptors) with each operand's commitment and the output's."""
    at = 5 + int.from_bytes(structure[1:5], "big")
    return len(structure) + 32 * (int.from_bytes(structure[at:at + 2], "big") + 1)


def check_settleable(ctx) -> None:
    """Raise NotSettleableOnChain naming the first node of the job's step whose kernels the
    on-chain referee cannot place (a MAT operand, or more than 65,535 kernels): a dispute that
    reaches it ends void (both out, stakes returned: nobody is shown wrong, nobody is paid), so
    such a job cannot pay an honest trainer; or whose encoding is longer than DisputeGame takes
    (MAX_NODE_BYTES: its party would lose revealing it), or whose structure or a kernel's encoding
    is too long for the moves that carry them (MAX_STRUCTURE_BYTES, MAX_KERNEL_BYTES: the job's own,
    passed with two nodes or two kernels; past a real chain's transaction size the honest party
    could not prove). JobRegistry cannot see it, so the client checks before posting and every
    trainer before staking."""
    if ctx.kernel_graph.unsettled:
        j, op = ctx.kernel_graph.unsettled[0]
        raise NotSettleableOnChain(
            f"node {j} ({op}) of the job's step computes what the on-chain referee cannot check: integers "
            f"computed from the batch or the weights, data moved in a way no descriptor names (a MAT operand, "
            f"docs/PROTOCOL.md §7), or a fold too large for one node", "ship integers derived from the data "
            f"(labels, masks) as tensors of the data file instead of computing them in forward, split a fold "
            f"over more than 65,535 elements (a smaller batch), or settle this job off chain")
    from ..protocol.trace import decode_structure
    for j in range(len(ctx.kernel_graph.structures)):
        structure = ctx.graph.structures[j]
        size = node_bytes(ctx, j)
        if size > MAX_NODE_BYTES:
            raise NotSettleableOnChain(
                f"node {j} ({decode_structure(structure)[0]}) of the job's step has {size} "
                f"bytes of input and output commitments; the chain takes a node of at most {MAX_NODE_BYTES} (a "
                "dispute move passes two of them)", "split the op over fewer tensors (fewer inputs or outputs per "
                "call), or settle this job off chain")
        if len(structure) > MAX_STRUCTURE_BYTES:
            raise NotSettleableOnChain(
                f"node {j} ({decode_structure(structure)[0]}) of the job's step has a structure of {len(structure)} "
                f"bytes (its attributes and input references); the chain's move that proves a node carries it with "
                f"two nodes and takes at most {MAX_STRUCTURE_BYTES}", "pass the op fewer or shorter attributes "
                "(a long list as a tensor of the data file), or settle this job off chain")
        for k, ks in enumerate(ctx.kernel_graph.structures[j]):
            size = kernel_bytes(ks)
            if size > MAX_KERNEL_BYTES:
                raise NotSettleableOnChain(
                    f"kernel {k} of node {j} ({decode_structure(structure)[0]}) of the job's step has an encoding "
                    f"of {size} bytes (its operand descriptors and commitments); the chain's move that "
                    f"reveals a kernel carries two of them and takes at most {MAX_KERNEL_BYTES}",
                    "split the op over fewer tensors (a concatenation of fewer parts), or settle this job off chain")


def ranges(indices: list[int], most: int) -> list[tuple[int, int]]:
    """Sorted chunk indices as (first, count) runs of consecutive ones, each at most `most` long."""
    out = []
    for i in indices:
        if out and out[-1][0] + out[-1][1] == i and out[-1][1] < most:
            out[-1] = (out[-1][0], out[-1][1] + 1)
        else:
            out.append((i, 1))
    return out


def _proof_tuple(p) -> tuple:
    """An ElementProof as the contracts' Tensors.ElementProof."""
    return (p.code, list(p.shape), p.chunk, p.index, bytes(p.chunk_bytes), [bytes(x) for x in p.siblings])


_NO_ELEMENT = (1, [], 1, 0, b"", [])  # a constant's source needs no proof
DESCENT_SPAN = 3  # Bisection.SPAN: the levels one descent move goes down

JOB_OPEN, JOB_DISPUTED, JOB_SETTLED = 1, 2, 3  # JobRegistry.Status
(OP_NONE, OP_TOPS, OP_DESCENT, OP_KERNEL, OP_TENSOR_TOP, OP_CHUNK, OP_SOURCE, OP_STEP, OP_DONE) = range(9)
(PHASE_STEPS, PHASE_OPEN, PHASE_STATE_LEAF, PHASE_STATE_SOURCE, PHASE_TOPS, PHASE_DESCENT, PHASE_NODE,
 PHASE_INPUT_SOURCE, PHASE_OPERATOR, PHASE_FAULT_NODE, PHASE_DONE) = range(1, 12)
PHASE_NAMES = ("none", "level 1: step bisection", "level 2: opening the step", "level 2: state leaf",
               "level 2: state source", "level 2: trace tops", "level 2: descent over nodes", "level 2: the node",
               "level 2: input source", "levels 3-5 (OperatorGame)", "level 2: showing the fault", "done")
OP_PHASE_NAMES = ("none", "level 3: kernel tops", "levels 3-4: descent", "level 3: the kernel",
                  "level 4: tensor tops", "level 4: the chunk", "level 4: operand source", "level 5: one step", "done")
