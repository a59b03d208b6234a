"""What a trainer agent stakes on. The commitments of a job are checked against its job
file (trainer_agent.mismatches); the other terms (the dispute clock, the windows, the
stake) are the client's choice, and a hostile choice takes an honest stake: a clock too
short to answer in, a commit deadline before training can end. An agent refuses such
terms before it joins; JobRegistry's floors are the chain's own, weaker, line."""
from __future__ import annotations

from dataclasses import dataclass

from ..chain.errors import ChainError
from ..chain.verde import CLOCK, COMMIT_BY, REVEAL_BY, STAKE


class TermsRefused(ChainError):
    """The job's terms could make this agent lose its stake though it trains honestly."""


@dataclass(frozen=True)
class Policy:
    min_clock_s: int = 1800          # each party's dispute clock: every move of a match must fit
    min_reveal_window_s: int = 300   # revealBy - commitBy
    train_margin: float = 3.0        # the commit window left must hold this many training runs...
    commit_slack_s: int = 60         # ...plus this much for the commit transaction itself
    max_stake_wei: int = 10 * 10**18

    def refusals(self, terms, now: int, train_s: float) -> list[str]:
        """Why these terms are unsafe for an agent that trains the job in `train_s` seconds
        and would join at chain time `now`; empty when they are safe."""
        out = []
        if terms[CLOCK] < self.min_clock_s:
            out.append(f"its dispute clock is {terms[CLOCK]} s; this agent needs at least {self.min_clock_s} s "
                       "to answer every move of a match (--min-clock-s)")
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
