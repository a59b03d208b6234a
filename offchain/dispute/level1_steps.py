"""Level 1: the steps. N-ary bisection over the step claims C_0..C_T (C_0 agreed, C_T
each party's result): the parties re-execute from their checkpoints to answer each
round. Starts from the two final claims (Disputed); hands level 2 the step s (C_s
agreed, C_{s+1} differs) and every claim each party made (StepFound)."""
from __future__ import annotations

from dataclasses import dataclass, field

from .engine import nary
from .party import Party

LEVEL = 1


@dataclass
class Disputed:
    """The start: per party, its claims by point (0: the agreed C_0, T: its result)."""
    claims: dict
    steps: int
    fanout: int
    rounds: list = field(default_factory=list)   # (lo, hi, points) per round, for the verdict


@dataclass
class StepFound:
    step: int
    claims: dict


def play(ctx, a: Party, b: Party, d: Disputed) -> StepFound:
    def on_round(lo, hi, ps, got):
        d.rounds.append((lo, hi, ps))
        for p, vals in zip((a, b), got):
            d.claims[p.name].update(zip(ps, vals))
    return StepFound(nary(LEVEL, a, b, 0, d.steps, d.fanout, "claim_at", on_round), d.claims)
