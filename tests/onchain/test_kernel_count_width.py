"""OperatorGame.postKernelTop proves the node's kernel count as the uint32 of the job's
kernel-root leaf (`uint32(count) || structRoot`). When the parameter was a uint64 and the
leaf hashed its low 32 bits, a cheater posting count + 2**32 passed the proof and ran the
level-3 descent over a 33-level tree: below its real tree's leaves the honest party had no
answer and lost the match, the payment and its stake (found by a red-team pass). The count
now decodes as a uint32: the wide post reverts, and the honest party wins the match."""
import pytest
from hexbytes import HexBytes

from offchain.chain.client import TransactionReverted
from offchain.chain.verde import PHASE_DONE, PHASE_OPERATOR, Verde
from offchain.trainer import Trainer
from offchain.trainer import adversaries as A

PAY, STAKE = 3 * 10**18, 10**18
NODE = 9  # CorruptValue(step=3, node=9): the match reaches levels 3-5 at node 9
COUNT_WORD = 4 + 2 * 32  # postKernelTop(id, top, count, ...): the count's head word in the calldata


def test_a_count_past_the_leafs_uint32_is_refused_and_the_honest_party_wins(embedded, setup):
    chain = embedded
    job, ctx, honest, d = setup
    v = Verde.deploy(chain)
    bad = Trainer(job, d / "wide-count", "cheater", behaviour=A.CorruptValue(step=3, node=NODE))
    bad.train()
    hon_acct, bad_acct = chain.accounts[2], chain.accounts[3]
    seats = [(hon_acct, honest), (bad_acct, bad)]
    jid, _ = v.deliver(job, ctx, seats, PAY, STAKE, chain.accounts[1])
    m = v.open_match(jid, hon_acct.address, bad_acct.address)
    assert v.play(m, seats, ctx, until=(PHASE_OPERATOR,)) == PHASE_OPERATOR
    assert v.move(m, honest, hon_acct, ctx)  # the honest top first: the wide count came second

    count, root, proof = ctx.kernel_graph.node_leaf(NODE)
    call = bytearray(HexBytes(v.operators.functions.postKernelTop(m, bytes(32), count, root, proof)._encode_transaction_data()))
    assert int.from_bytes(call[COUNT_WORD:COUNT_WORD + 32], "big") == count
    call[COUNT_WORD:COUNT_WORD + 32] = (count + 2**32).to_bytes(32, "big")  # proven by the same leaf once
    with pytest.raises(TransactionReverted):
        chain._send("postKernelTop()", {"to": v.operators.address, "data": bytes(call), "value": 0}, bad_acct)

    assert v.play(m, seats, ctx) == PHASE_DONE  # the cheater goes on with the job's count, and loses
    decided = v.decision(m)
    assert decided["winner"] == hon_acct.address, decided["reason"]
    v.settle_decided(m)
    assert v.owed(hon_acct.address) == PAY + 2 * STAKE and v.owed(bad_acct.address) == 0
