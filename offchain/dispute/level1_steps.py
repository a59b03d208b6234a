"""Level 1: the steps. N-ary bisection over the step claims C_0..C_T (C_0 agreed, C_T
each party's result): the parties re-execute from their checkpoints to answer each
round. -> the disputed step s (C_s agreed, C_{s+1} differs)."""
from __future__ import annotations

from .engine import nary
from .party import Party

LEVEL = 1


def play(a: Party, b: Party, steps: int, fanout: int, on_round=None) -> int:
    return nary(LEVEL, a, b, 0, steps, fanout, "claim_at", on_round)
