"""Malformed moves for the Garbler adversary: every move function of both games (read from
their ABIs), called with random calldata of the right ABI types (random hashes, bytes of
random length, arrays of random size). The games must refuse each (a revert) or rule against its sender; tests check
the honest party still wins and every stake is where it belongs."""
from __future__ import annotations

import random

from web3 import Web3

from ..chain.errors import TransactionReverted

def _value(abi: dict, rng: random.Random):
    t = abi["type"]
    if t.endswith("]"):  # T[] (any length) or T[n]
        inner, n = t[:t.rindex("[")], t[t.rindex("[") + 1:-1]
        return [_value({**abi, "type": inner}, rng) for _ in range(int(n) if n else rng.randrange(4))]
    if t == "tuple":
        return tuple(_value(c, rng) for c in abi["components"])
    if t == "bytes32":
        return rng.randbytes(32)
    if t == "bytes":
        return rng.randbytes(rng.choice((0, 1, 31, 33, 64, 200)))
    if t.startswith("uint"):
        top = 2**int(t[4:] or 256)
        return rng.choice((0, 1, top - 1, rng.randrange(min(top, 1 << 16))))
    if t == "address":
        return Web3.to_checksum_address(rng.randbytes(20))
    if t == "bool":
        return rng.random() < 0.5
    if t == "string":
        return rng.randbytes(rng.randrange(40)).hex()
    raise ValueError(f"no garbage for ABI type {t}")


def _moves(contract) -> list[dict]:
    """Every state-changing function of a game that names a match first: its moves (and the
    hand-overs only the other game may call, which must refuse a party just the same)."""
    return [f for f in contract.abi if f["type"] == "function" and f["stateMutability"] == "nonpayable"
            and f["inputs"] and f["inputs"][0]["name"] == "id"]


def garble(v, match_id: int, account, rng: random.Random) -> int:
    """Send one malformed call of every move of both games for this match. Each must revert
    or rule against its sender (the tests check who wins). -> how many were sent."""
    sent = 0
    for contract in (v.game, v.operators):
        for abi in _moves(contract):
            args = [match_id] + [_value(i, rng) for i in abi["inputs"][1:]]
            sent += 1
            try:
                v.chain.transact(getattr(contract.functions, abi["name"])(*args), sender=account)
            except TransactionReverted:
                pass
    return sent
