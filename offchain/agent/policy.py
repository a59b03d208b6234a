"""What a trainer agent stakes on. The commitments of a job are checked against its job
file (trainer_agent.mismatches); the other terms (the dispute clock, the windows, the
stake) are the client's choice, and a hostile choice takes an honest stake: a clock too
short to answer in, a commit deadline before training can end. An agent refuses such
terms before it joins; JobRegistry's floors are the chain's own, weaker, line."""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..chain.errors import ChainError
from ..chain.verde import CLOCK, COMMIT_BY, COMMITMENT_NAMES, REVEAL_BY, STAKE

STEPS, FANOUT = COMMITMENT_NAMES.index("steps"), COMMITMENT_NAMES.index("fanout")


class TermsRefused(ChainError):
    """The job's terms could make this agent lose its stake though it trains honestly."""


@dataclass(frozen=True)
class Policy:
    min_clock_s: int = 1800          # each party's dispute clock: every move of a match must fit
    min_reveal_window_s: int = 300   # revealBy - commitBy
    train_margin: float = 3.0        # the commit window left must hold this many training runs...
    commit_slack_s: int = 60         # ...plus this much for the commit transaction itself
    max_stake_wei: int = 10 * 10**18

    @staticmethod
    def dispute_steps(steps: int, fanout: int) -> int:
        """The most steps a dispute makes a trainer re-execute (its first round's checkpoints
        kept): level 1's intervals, T/N + T/N^2 + ... < T/(N-1), one step to open each
        first-round claim, and the disputed step traced for levels 2-5 (twice)."""
        return math.ceil(steps / (fanout - 1)) + fanout + 2

    def least_clock_s(self, train_s: float, steps: int, fanout: int) -> int:
        """The least dispute clock this agent stakes on: the moves' own time (min_clock_s) plus
        train_margin times what its re-executions take. A clock the re-executions do not fit
        loses an honest stake to a cheater that answers at once (garbage at level 1 costs it
        nothing until the disputed step), whatever the floors."""
        return self.min_clock_s + math.ceil(self.train_margin * train_s / steps * self.dispute_steps(steps, fanout))

    def refusals(self, terms, now: int, train_s: float) -> list[str]:
        """Why these terms are unsafe for an agent that trains the job in `train_s` seconds
        and would join at chain time `now`; empty when they are safe."""
        out = []
        least = self.least_clock_s(train_s, terms[STEPS], terms[FANOUT])
        if terms[CLOCK] < least:
            k = self.dispute_steps(terms[STEPS], terms[FANOUT])
            out.append(f"its dispute clock is {terms[CLOCK]} s; this agent needs at least {least} s: "
                       f"{self.min_clock_s} s for the moves (--min-clock-s) plus {self.train_margin:g}x the "
                       f"{train_s / terms[STEPS] * k:.0f} s a dispute's re-execution of up to {k} steps takes here "
                       "(--train-margin)")
        need = self.train_margin * train_s + self.commit_slack_s
        if terms[COMMIT_BY] - now < need:
            out.append(f"its commit deadline is {max(0, terms[COMMIT_BY] - now)} s away; training takes about "
                       f"{train_s:.0f} s here, and this agent wants {need:.0f} s ({self.train_margin:g}x that plus "
                       f"{self.commit_slack_s} s; --train-margin)")
        if terms[REVEAL_BY] - terms[COMMIT_BY] < self.min_reveal_window_s:
            out.append(f"its reveal window is {terms[REVEAL_BY] - terms[COMMIT_BY]} s; this agent needs at least "
                       f"{self.min_reveal_window_s} s (--min-reveal-window-s)")
        if terms[STAKE] > self.max_stake_wei:
            out.append(f"its stake is {terms[STAKE] / 1e18} ETH, more than this agent's limit of "
                       f"{self.max_stake_wei / 1e18} ETH (--max-stake)")
        return out
