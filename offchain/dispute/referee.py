"""The referee (the client, off chain): plays the five levels between two trainers and
decides; a tournament among k > 2 distinct claims. Trainers are reached through Party
endpoints (in process or over a transport); a trainer that does not answer in time, or
answers something that fails a check, loses."""
from __future__ import annotations

import time
from dataclasses import dataclass, field

from ..protocol.claims import seal
from . import level1_steps, level2_nodes, level3_kernels
from .context import Context
from .level2_nodes import Case3
from .party import Lost, Party


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
    claims = {a.name: {0: ctx.initial_claim, ctx.job.spec.steps: a.final},
              b.name: {0: ctx.initial_claim, ctx.job.spec.steps: b.final}}
    rounds = []

    def on_round(lo, hi, ps, got):
        rounds.append((lo, hi, ps))
        for p, vals in zip((a, b), got):
            claims[p.name].update(zip(ps, vals))

    level, step, node = 1, None, None
    try:
        step = level1_steps.play(a, b, ctx.job.spec.steps, ctx.job.spec.fanout, on_round)
        level = 2
        out = level2_nodes.play(ctx, a, b, step, claims)
        if isinstance(out, Case3):
            node, level = out.node, 3
            out, level = level3_kernels.play(ctx, a, b, out)
        losers = out
    except Lost as lost:
        losers, level = [lost.party], lost.level
        lost.party.reason = lost.reason
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
