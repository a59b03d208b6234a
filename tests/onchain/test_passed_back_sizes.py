"""What the second poster of a round passes back must stay a move that fits a real chain
(red team). The first to reveal kernel k leaves its encoding and its proof in a KernelPosted
event, and the second passes both back; when the kernel trees differ the game checks the
kernel against its leaf and never reads the proof, so a cheater posting first could pad its
proof with thousands of hashes, and the honest agent passed them all back: a transaction past
geth's 128 KB pool limit (docs/PROTOCOL.md §3, "every move fits a real chain") that a real
node refuses, so its clock ran out. The agent now passes back only a proof the game can read
(depth(count) hashes; none otherwise). Likewise the first to reveal the disputed node at level
2 leaves it in NodePosted: a node's output count is not in the job's graph, so a cheater padded
its node with outputs; DisputeGame now takes a node of at most MAX_NODE bytes (a larger one
loses its party the match) and every honest agent refuses a job whose nodes are larger."""
import dataclasses
import re
from pathlib import Path

import pytest

from offchain.chain.verde import MAX_NODE_BYTES, NotSettleableOnChain, Verde, check_settleable, node_bytes
from offchain.trainer import Trainer
from offchain.trainer import adversaries as A

PAY, STAKE = 3 * 10**18, 10**18
MOVE_BYTES = 100_000  # the largest move calldata the design allows (DESIGN.md §7)
JUNK = 3_500  # hashes: 112 KB, a transaction the cheater can still send


@dataclasses.dataclass
class PaddedKernelProof(A.CorruptValue):
    """A wrong value (CorruptValue: the match reaches kernel k of its node by a descent), and a
    kernel proof padded with junk hashes the game does not read when the trees differ."""
    name = "padded-kernel-proof"

    def tamper(self, method, args, result):
        return list(result) + [b"\x07" * 32] * JUNK if method == "kernel_proof" else result


def _calldata_of(chain, v, address) -> list[tuple[str, int]]:
    """(function selector, calldata bytes) of every transaction `address` sent since the deployment."""
    out = []
    for n in range(v.from_block, chain.w3.eth.block_number + 1):
        for tx in chain.w3.eth.get_block(n, full_transactions=True)["transactions"]:
            if tx["from"] == address:
                data = bytes(tx["input"] if "input" in tx else tx["data"])
                out.append((data[:4].hex(), len(data)))
    return out


def test_a_padded_kernel_proof_is_not_passed_back_and_the_honest_party_wins(embedded, setup):
    chain = embedded
    job, ctx, honest, d = setup
    v = Verde.deploy(chain)
    bad = Trainer(job, d / "padded-proof", "cheater", behaviour=PaddedKernelProof(step=3, node=9))
    bad.train()
    bad_acct, hon_acct = chain.accounts[2], chain.accounts[3]
    seats = [(bad_acct, bad), (hon_acct, honest)]  # the cheater moves first in every round
    jid, _ = v.deliver(job, ctx, seats, PAY, STAKE, chain.accounts[1])
    m = v.open_match(jid, bad_acct.address, hon_acct.address)
    v.play(m, seats, ctx)
    (ev,) = v.operators.events.KernelPosted().get_logs(from_block=v.from_block)
    assert len(ev["args"]["proof"]) > JUNK  # the game took the padded proof
    decided = v.decision(m)
    assert decided["winner"] == hon_acct.address, decided
    v.settle_decided(m)
    assert v.owed(hon_acct.address) == PAY + 2 * STAKE and v.owed(bad_acct.address) == 0
    sizes = _calldata_of(chain, v, hon_acct.address)
    assert sizes and max(n for _, n in sizes) < MOVE_BYTES, sorted(sizes, key=lambda x: -x[1])[:3]


OUTPUTS = 3_300  # commitments a cheater adds to its node: 105.6 KB, a move it can still send
NODE = 9


class PaddedNode(Trainer):
    """Honest up to its last step, whose trace has node NODE with OUTPUTS more output
    commitments (its own node hashes to its own leaf: a node's output count is not in the job's
    graph). Level 2 reaches that node; the first to post it leaves it in NodePosted and the
    second must pass it back."""

    def step_trace(self, s, keep=False):
        import dataclasses as dc

        from offchain.protocol import merkle
        tr = super().step_trace(s, keep)
        if s != self.steps - 1 or getattr(tr, "padded", False):
            return tr
        nodes = list(tr.nodes)
        nodes[NODE] = dc.replace(nodes[NODE], outputs=nodes[NODE].outputs + (b"\x05" * 32,) * OUTPUTS)
        tr = dc.replace(tr, nodes=nodes, tree=merkle.Tree(tuple(n.leaf() for n in nodes)))
        tr.padded = True
        self._trace_cache = tr
        return tr

    def open_claim(self, p):
        if p != self.steps:
            return super().open_claim(p)
        return super().open_claim(p)[0], self.step_trace(p - 1).tree.root

    def claim_at(self, ps):
        from offchain.protocol.claims import step_claim
        return [step_claim(*self.open_claim(p)) if p == self.steps else c for p, c in zip(ps, super().claim_at(ps))]

    def final_claim(self):
        return self.claim_at([self.steps])[0]


def test_a_node_padded_with_outputs_loses_and_is_not_passed_back(embedded, setup):
    """The cheater posts its padded node first: it loses at level 2; the honest agent's moves stay small."""
    chain = embedded
    job, ctx, honest, d = setup
    v = Verde.deploy(chain)
    bad = PaddedNode(job, d / "padded-node", "cheater")
    bad.train()
    assert bad.final_claim() != honest.final_claim()
    bad_acct, hon_acct = chain.accounts[4], chain.accounts[5]
    seats = [(bad_acct, bad), (hon_acct, honest)]  # the cheater moves first in every round
    jid, _ = v.deliver(job, ctx, seats, PAY, STAKE, chain.accounts[1])
    m = v.open_match(jid, bad_acct.address, hon_acct.address)
    v.play(m, seats, ctx)
    decided = v.decision(m)
    assert decided["winner"] == hon_acct.address and decided["level"] == 2, decided
    assert decided["reason"] == "its node is larger than a move may pass back"
    v.settle_decided(m)
    assert v.owed(hon_acct.address) == PAY + 2 * STAKE and v.owed(bad_acct.address) == 0
    sizes = _calldata_of(chain, v, hon_acct.address)
    assert sizes and max(n for _, n in sizes) < MOVE_BYTES, sorted(sizes, key=lambda x: -x[1])[:3]


def test_the_node_cap_is_the_contracts_and_the_honest_nodes_are_measured_right(setup, monkeypatch):
    job, ctx, honest, d = setup
    sol = (Path(__file__).resolve().parents[2] / "contracts" / "DisputeGame.sol").read_text()
    assert int(re.search(r"MAX_NODE = ([0-9_]+);", sol).group(1).replace("_", "")) == MAX_NODE_BYTES
    sizes = [node_bytes(ctx, j) for j in range(len(ctx.graph.structures))]
    assert sizes == [len(honest.node(1, j)[0]) for j in range(len(sizes))]
    check_settleable(ctx)
    monkeypatch.setattr("offchain.chain.verde.MAX_NODE_BYTES", max(sizes) - 1)
    with pytest.raises(NotSettleableOnChain, match=f"node {sizes.index(max(sizes))} "):
        check_settleable(ctx)


GETH_TX_BYTES = 131_072  # geth's transaction pool refuses a larger transaction


def test_a_job_whose_structure_or_kernel_is_too_long_for_its_move_is_refused(setup, artifacts):
    """A node's structure (its attributes) and a kernel's encoding (its operand descriptors) are
    the job's own, uncapped by the contracts: postNode carries the node's structure beside two
    nodes (the honest one's and the other's, up to MAX_NODE), postKernel two kernel encodings and,
    at the result kernel, a node. A client's job with a 100 KB structure (or a 50 KB kernel) makes
    the honest party's move larger than a real chain takes, so it could not prove the cheater
    wrong and its clock would run out. check_settleable (every agent before staking, `verde
    post`) refuses such a job, naming the node; at the caps the moves fit 100 KB."""
    import types

    from web3 import Web3

    from offchain.chain.verde import MAX_KERNEL_BYTES, MAX_STRUCTURE_BYTES, kernel_bytes
    from offchain.protocol.trace import STRUCTURE, decode_structure
    job, ctx, honest, d = setup
    game = Web3().eth.contract(abi=artifacts["DisputeGame"].abi).functions
    ops = Web3().eth.contract(abi=artifacts["OperatorGame"].abi).functions
    j = 9
    enc, proof = honest.node(1, j)[0], ctx.graph.tree.proof(j)

    def structure_of(size):
        op, attrs, refs = decode_structure(ctx.graph.structures[j])
        name = op.encode()
        tail = len(refs).to_bytes(2, "big") + b"".join(r.encode() for r in refs)
        pad = size - (1 + 4 + len(name) + 4 + len(attrs) + len(tail))
        attrs += bytes(pad)
        return STRUCTURE + len(name).to_bytes(4, "big") + name + len(attrs).to_bytes(4, "big") + attrs + tail

    def post_node(structure):
        return len(game.postNode(1, enc, structure, proof, bytes(MAX_NODE_BYTES))._encode_transaction_data()) // 2

    def post_kernel(size):
        kproof = [bytes(32)] * 16  # the deepest kernel tree (65,535 kernels)
        return len(ops.postKernel(1, bytes(size), kproof, kproof, (bytes(size), kproof),
                                  bytes(MAX_NODE_BYTES))._encode_transaction_data()) // 2

    assert post_node(structure_of(MAX_STRUCTURE_BYTES)) < MOVE_BYTES
    assert post_kernel(MAX_KERNEL_BYTES) < MOVE_BYTES
    big = structure_of(100_000)
    assert decode_structure(big)[2] == decode_structure(ctx.graph.structures[j])[2]  # the same node, longer attributes
    assert post_node(big) > GETH_TX_BYTES
    graph = types.SimpleNamespace(structures=[big if i == j else s for i, s in enumerate(ctx.graph.structures)])
    with pytest.raises(NotSettleableOnChain, match=f"node {j} .* has a structure of {len(big)} bytes"):
        check_settleable(types.SimpleNamespace(graph=graph, kernel_graph=ctx.kernel_graph))
    kernels = [list(ks) for ks in ctx.kernel_graph.structures]
    kernels[j][0] += bytes(50_000)
    assert post_kernel(kernel_bytes(kernels[j][0])) > GETH_TX_BYTES
    kg = types.SimpleNamespace(structures=kernels, unsettled=[])
    with pytest.raises(NotSettleableOnChain, match=f"kernel 0 of node {j} .* has an encoding of"):
        check_settleable(types.SimpleNamespace(graph=ctx.graph, kernel_graph=kg))
    check_settleable(ctx)  # the job itself passes
