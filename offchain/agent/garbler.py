"""Malformed moves for the Garbler adversary: every move function of both games, called with
random calldata of the right ABI types (random hashes, bytes of random length, arrays of
random size). The games must refuse each (a revert) or rule against its sender; tests check
the honest party still wins and every stake is where it belongs."""
from __future__ import annotations

import random

from ..chain.errors import TransactionReverted

MOVES = {"DisputeGame": ("postClaims", "openStep", "postStateLeaf", "resolveState", "postTop", "postChildren",
                         "postNode", "resolveInput"),
         "OperatorGame": ("postKernelTop", "postChildren", "postKernel", "postTensorTop", "postChunk",
                          "resolveOperand", "resolveStep")}


def _value(abi: dict, rng: random.Random):
    t = abi["type"]
    if t.endswith("[]"):
        return [_value({**abi, "type": t[:-2]}, rng) for _ in range(rng.randrange(4))]
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
        return "0x" + rng.randbytes(20).hex()
    if t == "bool":
        return rng.random() < 0.5
    raise ValueError(f"no garbage for ABI type {t}")


def garble(v, match_id: int, account, rng: random.Random) -> tuple[int, int]:
    """Send one malformed call of every move of both games for this match. -> (sent, how
    many the chain accepted: each such move must have ruled against its sender)."""
    from web3 import Web3
    sent = accepted = 0
    for contract in (v.game, v.operators):
        name = "DisputeGame" if contract is v.game else "OperatorGame"
        for fn in MOVES[name]:
            abi = next(x for x in contract.abi if x.get("name") == fn and x["type"] == "function")
            args = [match_id] + [_value(i, rng) for i in abi["inputs"][1:]]
            args = [Web3.to_checksum_address(a) if isinstance(a, str) else a for a in args]
            sent += 1
            try:
                v.chain.transact(getattr(contract.functions, fn)(*args), sender=account)
                accepted += 1
            except TransactionReverted:
                pass
    return sent, accepted
