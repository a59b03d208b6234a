"""What the second poster of a round passes back must stay a move that fits a real chain
(red team). The first to reveal kernel k leaves its encoding and its proof in a KernelPosted
event, and the second passes both back; when the kernel trees differ the game checks the
kernel against its leaf and never reads the proof, so a cheater posting first could pad its
proof with thousands of hashes, and the honest agent passed them all back: a transaction past
geth's 128 KB pool limit (docs/PROTOCOL.md §3, "every move fits a real chain") that a real
node refuses, so its clock ran out. The agent now passes back only a proof the game can read
(depth(count) hashes; none otherwise)."""
import dataclasses

from offchain.chain.verde import Verde
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
