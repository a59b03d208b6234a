"""The referee (the client, off chain): plays the five levels between two trainers and
decides; a tournament among k > 2 distinct claims. Trainers are reached through Party
endpoints (in process or over a transport); a trainer that does not answer in time, or
answers something that fails a check, loses."""
from __future__ import annotations

import time
from dataclasses import dataclass, field

from ..protocol.claims import seal
from . import level1_steps, level2_nodes, level3_kernels, level4_elements, level5_primitive
from .context import Context
from .party import Lost, Party

# the one engine's five levels, as peers: each plays from the previous level's hand-off and
# returns the losers or its own hand-off to the next
LEVELS = (level1_steps, level2_nodes, level3_kernels, level4_elements, level5_primitive)


@dataclass
class Verdict:
    winner: str | None
    losers: list
    level: int
    reason: str
    step: int | None = None
    node: int | None = None
    rounds: list = field(default_factory=list)       # level-1 rounds: (lo, hi, points)
    bytes_received: int = 0
    answers: int = 0
    seconds: float = 0.0

    def __str__(self):
        where = "" if self.step is None else f" (step {self.step}" + ("" if self.node is None else f", node {self.node}") + ")"
        return f"{', '.join(self.losers)} lose at level {self.level}{where}: {self.reason}"


def dispute(ctx: Context, a: Party, b: Party) -> Verdict:
    """a and b posted different final claims (a.final, b.final)."""
    t0 = time.perf_counter()
    if a.final == b.final:
        return Verdict(None, [], 0, "the claims agree: nothing to dispute")
    start = level1_steps.Disputed({a.name: {0: ctx.initial_claim, ctx.job.spec.steps: a.final},
                                   b.name: {0: ctx.initial_claim, ctx.job.spec.steps: b.final}},
                                  ctx.job.spec.steps, ctx.job.spec.fanout)
    case, step, node, losers, level = start, None, None, [], 0
    try:
        for mod in LEVELS:
            level = mod.LEVEL
            out = mod.play(ctx, a, b, case)
            if isinstance(out, list):
                losers = out
                break
            case = out
            step, node = getattr(case, "step", step), getattr(case, "node", node)
    except Lost as lost:
        losers, level = [lost.party], lost.level
        lost.party.reason = lost.reason
    rounds = start.rounds
    names = [p.name for p in losers]
    winner = next((p.name for p in (a, b) if p not in losers), None)
    reason = "; ".join(p.reason for p in losers) or "no loser"
    return Verdict(winner, names, level, reason, step, node, rounds, a.bytes_received + b.bytes_received,
                   a.answered + b.answered, time.perf_counter() - t0)


def check_seal(job_id: bytes, party: Party, sealed: bytes, salt: bytes) -> bool:
    """Commit-reveal: a revealed claim must open the seal posted before the deadline,
    which binds it to its trainer (a copied seal does not open for the copier)."""
    return seal(job_id, party.name, party.final, salt) == sealed


def tournament(ctx: Context, parties: list[Party]) -> tuple[bytes | None, list[Verdict]]:
    """Distinct claims play winner-stays matches; the last standing claim is accepted.
    -> (accepted claim or None, the verdicts). With one honest party it always wins."""
    verdicts = []
    champion = None
    for p in parties:
        if champion is None:
            champion = p
            continue
        if p.final == champion.final:
            continue
        v = dispute(ctx, champion, p)
        verdicts.append(v)
        if champion.name in v.losers:
            champion = p if p.name not in v.losers else None
    # a party that agreed with a beaten champion stands or falls with its claim
    return (champion.final if champion else None), verdicts
