"""Test vectors of the wire format for both implementations (Python tests and the
Solidity tests of the contracts): `python -m offchain.protocol.vectors > tests/vectors/protocol.json`."""
from __future__ import annotations

import json

import numpy as np

from . import merkle
from ..dispute.oprun import fault_output
from .claims import fault_claim, fault_state, seal, step_claim
from .tensors import Committed, canonical
from .trace import Node, Ref


def _hex(b: bytes) -> str:
    return "0x" + b.hex()


def build() -> dict:
    out = {"merkle": [], "tensors": [], "nodes": [], "claims": [], "points": [], "faults": []}
    from ..dispute.engine import points
    for lo, hi, n in ((0, 40, 20), (0, 10, 4), (3, 9, 4), (17, 19, 8), (0, 1000, 3), (5, 7, 2)):
        out["points"].append({"lo": lo, "hi": hi, "n": n, "points": points(lo, hi, n)})
    for n in (1, 2, 3, 4, 5, 7, 8, 9):
        leaves = [merkle.leaf_hash(bytes([i]) * (i + 1)) for i in range(n)]
        tree = merkle.Tree(tuple(leaves))
        out["merkle"].append({"data": [_hex(bytes([i]) * (i + 1)) for i in range(n)], "leaves": [_hex(x) for x in leaves],
                              "root": _hex(tree.root), "proofs": [[_hex(s) for s in tree.proof(i)] for i in range(n)]})
    rng = np.random.default_rng(2026)
    for shape, chunk in (((), 4), ((5,), 2), ((3, 4), 5), ((2, 3, 2), 64)):
        x = canonical(rng.standard_normal(shape).astype(np.float32))
        if x.size > 1:
            x.reshape(-1)[1] = -0.0
        c = Committed(x, chunk)
        proofs = []
        for i in range(x.size):
            p = c.element_proof(i)
            proofs.append({"index": i, "chunk": _hex(p.chunk_bytes), "siblings": [_hex(s) for s in p.siblings],
                           "element": _hex(p.element())})
        out["tensors"].append({"dtype": "float32", "shape": list(shape), "chunk": chunk, "bytes": _hex(x.tobytes()),
                               "commitment": _hex(c.root), "proofs": proofs})
    node = Node("aten.mul.Tensor", bytes.fromhex("060000000206000000020700000700010600000000"),
                (Ref(0, 3, 1), Ref(1, 2, 0)), (b"\x11" * 32, b"\x22" * 32), (b"\x33" * 32,))
    out["nodes"].append({"op": node.op, "attrs": _hex(node.attrs),
                         "refs": [[r.kind, r.index, r.slot] for r in node.refs],
                         "inputs": [_hex(x) for x in node.inputs], "outputs": [_hex(x) for x in node.outputs],
                         "structure": _hex(node.structure()), "encoding": _hex(node.encode()), "leaf": _hex(node.leaf())})
    fnode = Node(node.op, node.attrs, node.refs, node.inputs, fault=(7, 2**40 + 5))
    out["faults"].append({"encoding": _hex(fnode.encode()), "leaf": _hex(fnode.leaf()), "kernel": 7,
                          "element": 2**40 + 5, "packed": (7 + 1) << 64 | (2**40 + 5),
                          "step": 3, "fault_state": _hex(fault_state(3)),
                          "trace_root": _hex(merkle.leaf_hash(b"trace")),
                          "claim": _hex(fault_claim(3, merkle.leaf_hash(b"trace"))),
                          "kernel_output": _hex(fault_output(2**40 + 5))})
    S, R = merkle.leaf_hash(b"state"), merkle.leaf_hash(b"trace")
    out["claims"].append({"state_root": _hex(S), "trace_root": _hex(R), "claim": _hex(step_claim(S, R)),
                          "initial": _hex(step_claim(S)), "job_id": _hex(b"\x05" * 32), "trainer": "alice",
                          "salt": _hex(b"\x07" * 32), "seal": _hex(seal(b"\x05" * 32, "alice", step_claim(S, R), b"\x07" * 32)),
                          "address": "0x00000000000000000000000000000000000a11ce",
                          "seal_address": _hex(seal(b"\x05" * 32, "0x00000000000000000000000000000000000a11ce",
                                                    step_claim(S, R), b"\x07" * 32))})
    return out


if __name__ == "__main__":
    print(json.dumps(build(), indent=1))
