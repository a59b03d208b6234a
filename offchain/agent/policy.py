"""What a trainer agent stakes on. The commitments of a job are checked against its job
file (trainer_agent.mismatches); the other terms (the dispute clock, the windows, the
stake) are the client's choice, and a hostile choice takes an honest stake: a clock too
short to answer in, a commit deadline before training can end. An agent refuses such
terms before it joins; JobRegistry's floors are the chain's own, weaker, line."""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..chain.errors import ChainError
from ..chain.verde import (ANSWER_GAS_PER_CHUNK, CLOCK, COMMIT_BY, COMMITMENT_NAMES, MAX_TRAINERS, REVEAL_BY, STAKE,
                           Delivery)

STEPS, FANOUT = COMMITMENT_NAMES.index("steps"), COMMITMENT_NAMES.index("fanout")
# What an honest trainer's own transactions may cost (gas; bounds with headroom over what
# tests/test_agent_security.py measures): the moves of every job (join, commit, reveal, settle
# after each decision, withdraw), and one party's moves in one match (open, level 1's rounds,
# levels 2-5 down to resolveStep at the chunk cap, a timeout), whatever the other party does.
PATH_GAS = 600_000
MATCH_GAS = 3_000_000
ROUND_GAS, ROUND_GAS_PER_POINT = 100_000, 2_000  # a level-1 round: postClaims with its points


def level1_rounds(steps: int, fanout: int) -> int:
    """The most rounds of level 1 (each splits the interval left into `fanout`)."""
    rounds, span = 0, steps
    while span > 1:
        span, rounds = math.ceil(span / fanout), rounds + 1
    return rounds


def match_gas(steps: int, fanout: int) -> int:
    """The most gas one party's moves in one match cost (MATCH_GAS plus level 1's rounds)."""
    return MATCH_GAS + level1_rounds(steps, fanout) * (ROUND_GAS + ROUND_GAS_PER_POINT * fanout)


def checkpoints(steps: int, fanout: int, seats: int) -> int:
    """The most checkpoints of its state an honest trainer writes for a job (one file per step
    at most): the first round's (its interior points and the last step), then in a match
    against each other seat each level-1 round's points, every one re-executed and kept."""
    return min(steps, fanout + (seats - 1) * level1_rounds(steps, fanout) * (fanout - 1))


def honest_gas(terms) -> int:
    """The most gas an honest trainer spends on a job: its own moves, and a match against every
    other seat (each a cheater it must beat)."""
    return PATH_GAS + (terms[MAX_TRAINERS] - 1) * match_gas(terms[STEPS], terms[FANOUT])


class TermsRefused(ChainError):
    """The job's terms could make this agent lose its stake though it trains honestly."""


@dataclass(frozen=True)
class Policy:
    min_clock_s: int = 1800          # each party's dispute clock: every move of a match must fit
    min_reveal_window_s: int = 300   # revealBy - commitBy
    train_margin: float = 3.0        # the commit window left must hold this many training runs...
    commit_slack_s: int = 60         # ...plus this much for the commit transaction itself
    max_stake_wei: int = 10 * 10**18
    min_answer_window_s: int = 300   # the deployment's time to answer one delivery challenge on chain
    max_lock_s: int = 30 * 86400     # the longest the stake may be held: deadlines, every match, delivery
    gas_price_margin: float = 3.0    # the gas price its later moves are budgeted at: this many times today's
    disk_reserve_mb: int = 512       # free disk kept beyond the job's checkpoints (logs, claims, the system's own)

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

    @staticmethod
    def lock_s(terms, now: int, delivery_window_s: int) -> int:
        """The longest a stake joined now may stay in the registry without anyone acting
        against the rules: to the reveal deadline, then one match per other seat (each at most
        both clocks), then the delivery window (answers within it)."""
        return terms[REVEAL_BY] - now + (terms[MAX_TRAINERS] - 1) * 2 * terms[CLOCK] + delivery_window_s

    def disk_refusal(self, terms, checkpoint_bytes: int, free_bytes: int, where) -> str | None:
        """Whether the disk holds every checkpoint the job and its disputes write: one that
        fills mid-job stops an honest trainer (no space left) after it staked, and the stake is
        lost to the deadlines and clocks it then misses."""
        n = checkpoints(terms[STEPS], terms[FANOUT], terms[MAX_TRAINERS])
        need = n * checkpoint_bytes + self.disk_reserve_mb * 2**20
        if free_bytes >= need:
            return None
        return (f"it keeps up to {n} checkpoints of its state ({checkpoint_bytes / 2**20:,.1f} MB each: the first "
                f"round's and each level-1 round of a match against every other seat) plus {self.disk_reserve_mb} MB "
                f"(--disk-reserve-mb), {need / 2**30:,.2f} GB, and the disk of {where} has {free_bytes / 2**30:,.2f} GB "
                "free")

    def delivery_refusals(self, delivery: Delivery, gas_price: int) -> list[str]:
        """The deployment's delivery terms (JobRegistry's immutables, any registry's): an answer
        window shorter than a few blocks lets the client take an honest held stake and share
        with one challenge, a bond under an answer's gas makes the honest trainer pay for
        putting the model on chain."""
        out = []
        if delivery.answer_s < self.min_answer_window_s:
            out.append(f"its registry's answer window is {delivery.answer_s} s: a client's delivery challenge could "
                       f"not be answered on chain in time, and the held stake and share would be the client's; this "
                       f"agent needs at least {self.min_answer_window_s} s (--min-answer-window-s)")
        least = math.ceil(ANSWER_GAS_PER_CHUNK * gas_price * self.gas_price_margin)
        if delivery.bond_wei < least:
            out.append(f"its registry's challenge bond is {delivery.bond_wei / 1e18:g} ETH a chunk, less than an "
                       f"answer's gas at {self.gas_price_margin:g}x today's price ({least / 1e18:g} ETH): a client "
                       "could make this agent pay to put the whole model on chain (--gas-price-margin)")
        return out

    def gas_refusals(self, terms, payment: int, gas_price: int) -> list[str]:
        """Whether the job's money pays for the gas an honest trainer spends, budgeted at
        gas_price_margin times today's price (the moves come later, and a price may spike): a
        cheater's stake must pay for the match it forces on the honest trainer (it goes to the
        accepted trainers' pot, shared by up to maxTrainers - 1 of them), and a seat's share of the
        payment for its own moves. Else a cheater with a tiny stake, or a client with a tiny
        payment, makes an honest trainer spend more gas than it is paid."""
        price = gas_price * self.gas_price_margin
        out = []
        seats = terms[MAX_TRAINERS]
        match = match_gas(terms[STEPS], terms[FANOUT])
        least = math.ceil(max(1, seats - 1) * match * price)
        if terms[STAKE] < least:
            out.append(f"its stake is {terms[STAKE] / 1e18:g} ETH, less than the gas a cheater's match costs this "
                       f"agent ({match:,} gas at {self.gas_price_margin:g}x today's price, shared by up to "
                       f"{max(1, seats - 1)} accepted trainers: {least / 1e18:g} ETH): a cheater would cost it more "
                       "than its forfeited stake pays (--gas-price-margin)")
        least = math.ceil(seats * PATH_GAS * price)
        if payment < least:
            out.append(f"its payment is {payment / 1e18:g} ETH, less than its {seats} seats' own moves cost in gas "
                       f"({PATH_GAS:,} gas each at {self.gas_price_margin:g}x today's price: {least / 1e18:g} ETH): "
                       "an honest trainer would pay to train it (--gas-price-margin)")
        return out

    def refusals(self, terms, now: int, train_s: float, delivery: Delivery | None = None,
                 gas_price: int = 0, payment: int | None = None) -> list[str]:
        """Why these terms are unsafe for an agent that trains the job in `train_s` seconds
        and would join at chain time `now` on a registry with these delivery terms (None: not
        checked) at this gas price, for this payment (None: the gas it pays for not checked);
        empty when they are safe."""
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
        lock = self.lock_s(terms, now, delivery.window_s if delivery else 0)
        if lock > self.max_lock_s:
            out.append(f"its stake could be held {lock} s: to the reveal deadline, then {terms[MAX_TRAINERS] - 1} "
                       f"matches of two {terms[CLOCK]} s clocks each, then the delivery window; this agent's limit is "
                       f"{self.max_lock_s} s (--max-lock-s)")
        if delivery and delivery.window_s:
            out += self.delivery_refusals(delivery, gas_price)
        if payment is not None:
            out += self.gas_refusals(terms, payment, gas_price)
        if terms[STAKE] > self.max_stake_wei:
            out.append(f"its stake is {terms[STAKE] / 1e18} ETH, more than this agent's limit of "
                       f"{self.max_stake_wei / 1e18} ETH (--max-stake)")
        return out
