"""The two sets of defaults `verde` uses, chosen by the chain it talks to (one place for both):

- public: any other chain. Floors, windows and clocks sized for a real network, where a
  block may wait, a trainer may be slow to answer and a client to check (today's defaults).
- local: a test node (Anvil, the embedded node; chain id 31337 or one that says it is a test
  node). Nothing waits there, so a job posted with the README's commands settles in about a
  minute (its windows close early once every seat has acted): `verde deploy` sets small
  floors, `verde post` short windows, `verde agent` a policy that accepts them.

A flag given on the command line always wins; `verde post`'s defaults never go below the
floors of the registry it posts to (a local chain deployed with public floors keeps them)."""
from __future__ import annotations

from dataclasses import dataclass

from ..agent.policy import Policy
from ..chain.verde import Floors

LOCAL_CHAIN_IDS = (31337,)  # Anvil's and Hardhat's


@dataclass(frozen=True)
class Profile:
    name: str
    floors: Floors              # verde deploy: the least a job may give (JobRegistry)
    delivery_window_s: int      # verde deploy: pay held for delivery after settlement
    answer_window_s: int        # verde deploy: a challenged trainer's time per challenge
    join_s: int                 # verde post: seconds to join
    train_s: int                # verde post: after the join deadline, seconds to commit
    reveal_s: int               # verde post: after that, seconds to reveal
    clock_s: int                # verde post: each party's dispute clock
    policy: Policy              # verde agent: the terms it stakes on
    poll_s: float               # verde agent: seconds between its reads of the chain when idle


# (public poll_s: a block comes every ~12 s, so faster reads see nothing new, and a rate-limited RPC counts each)
PUBLIC = Profile("public", Floors(), delivery_window_s=1800, answer_window_s=300, join_s=600, train_s=3600,
                 reveal_s=600, clock_s=3600, policy=Policy(), poll_s=4.0)
LOCAL = Profile("local", Floors(clock_s=60, commit_window_s=20, reveal_window_s=20), delivery_window_s=300,
                answer_window_s=60, join_s=60, train_s=40, reveal_s=20, clock_s=300,
                policy=Policy(min_clock_s=60, min_reveal_window_s=20, commit_slack_s=10,
                              min_answer_window_s=60), poll_s=0.5)


def is_local(chain) -> bool:
    """A test node: Anvil or the embedded chain (the client recognised it), or chain id 31337."""
    return bool(chain.local) or chain.chain_id in LOCAL_CHAIN_IDS


def profile_of(chain) -> Profile:
    return LOCAL if is_local(chain) else PUBLIC


def applies(chain) -> str:
    """One line saying which profile applies and why (status, agent, deploy, post print it)."""
    p = profile_of(chain)
    why = (f"chain id {chain.chain_id} is a local test chain" if p is LOCAL else
           f"chain id {chain.chain_id} is not a local test chain")
    return f"{p.name} profile ({why}; short windows only on a local chain)"
