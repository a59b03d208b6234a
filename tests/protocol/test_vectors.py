"""tests/vectors/protocol.json is what the code produces (no silent format drift), and an
independent derivation with nothing but hashlib agrees with it (docs/PROTOCOL.md)."""
import hashlib
import json
from pathlib import Path

from offchain.protocol.vectors import build

VECTORS = json.loads((Path(__file__).resolve().parents[1] / "vectors" / "protocol.json").read_text())


def h(*parts):
    return hashlib.sha256(b"".join(parts)).digest()


def b(x):
    return bytes.fromhex(x[2:])


def test_the_shipped_vectors_are_what_the_code_produces():
    assert build() == VECTORS, "regenerate: python -m offchain.protocol.vectors > tests/vectors/protocol.json"


def test_merkle_vectors_by_hand():
    for case in VECTORS["merkle"]:
        leaves = [h(b"\x00", b(d)) for d in case["data"]]
        assert [b(x) for x in case["leaves"]] == leaves
        level = leaves + [bytes(32)] * ((1 << max(0, (len(leaves) - 1).bit_length())) - len(leaves))
        while len(level) > 1:
            level = [h(b"\x01", level[i], level[i + 1]) for i in range(0, len(level), 2)]
        assert b(case["root"]) == h(b"\x02", len(leaves).to_bytes(8, "big"), level[0])
        for i, proof in enumerate(case["proofs"]):
            node = leaves[i]
            for k, s in enumerate(proof):
                node = h(b"\x01", b(s), node) if (i >> k) & 1 else h(b"\x01", node, b(s))
            assert h(b"\x02", len(leaves).to_bytes(8, "big"), node) == b(case["root"])


def test_tensor_vectors_by_hand():
    for case in VECTORS["tensors"]:
        raw, chunk = b(case["bytes"]), case["chunk"] * 4
        chunks = [raw[i:i + chunk] for i in range(0, len(raw), chunk)]
        leaves = [h(b"\x00", c) for c in chunks]
        level = leaves + [bytes(32)] * ((1 << max(0, (len(leaves) - 1).bit_length())) - len(leaves))
        while len(level) > 1:
            level = [h(b"\x01", level[i], level[i + 1]) for i in range(0, len(level), 2)]
        root = h(b"\x02", len(leaves).to_bytes(8, "big"), level[0])
        head = b"\x03\x01" + bytes([len(case["shape"])]) + b"".join(d.to_bytes(8, "big") for d in case["shape"])
        assert h(head, root) == b(case["commitment"])
        for p in case["proofs"]:
            i = p["index"]
            assert b(p["chunk"]) == chunks[i // case["chunk"]]
            assert b(p["element"]) == raw[4 * i:4 * i + 4]


def test_node_and_claim_vectors_by_hand():
    n = VECTORS["nodes"][0]
    op, attrs = n["op"].encode(), b(n["attrs"])
    refs = b"".join(bytes([k]) + i.to_bytes(4, "big") + s.to_bytes(2, "big") for k, i, s in n["refs"])
    structure = (b"\x05" + len(op).to_bytes(4, "big") + op + len(attrs).to_bytes(4, "big") + attrs +
                 len(n["refs"]).to_bytes(2, "big") + refs)
    assert b(n["structure"]) == structure
    enc = (b"\x04" + h(structure) + len(n["inputs"]).to_bytes(2, "big") + b"".join(b(x) for x in n["inputs"]) +
           len(n["outputs"]).to_bytes(2, "big") + b"".join(b(x) for x in n["outputs"]))
    assert b(n["encoding"]) == enc and b(n["leaf"]) == h(b"\x00", enc)
    c = VECTORS["claims"][0]
    assert b(c["claim"]) == h(b"\x06", b(c["state_root"]), b(c["trace_root"]))
    assert b(c["initial"]) == h(b"\x06", b(c["state_root"]), bytes(32))
    assert b(c["seal"]) == h(b"\x07", b(c["job_id"]), c["trainer"].encode(), b(c["claim"]), b(c["salt"]))


def test_fault_vectors_by_hand():
    """The fault node (0x0D), the fault claim and a faulting kernel's output (docs/PROTOCOL.md
    §4, §6, §7), from the node vector's own structure and inputs."""
    n, f = VECTORS["nodes"][0], VECTORS["faults"][0]
    ins = b"".join(b(x) for x in n["inputs"])
    enc = (b"\x0d" + h(b(n["structure"])) + len(n["inputs"]).to_bytes(2, "big") + ins +
           f["kernel"].to_bytes(4, "big") + f["element"].to_bytes(8, "big"))
    assert b(f["encoding"]) == enc and b(f["leaf"]) == h(b"\x00", enc)
    assert b(f["fault_state"]) == h(b"\x0a", f["step"].to_bytes(4, "big"))
    assert b(f["claim"]) == h(b"\x06", b(f["fault_state"]), b(f["trace_root"]))
    assert b(f["kernel_output"]) == h(b"\x0e", f["element"].to_bytes(8, "big"))
