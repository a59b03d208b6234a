"""Issue #42: every move fits a real chain. The job schema and the registry cap the chunk at
MAX_CHUNK elements (docs/PROTOCOL.md §3: at most 4 chunks of 8-byte elements in a move, under
100 KB of calldata and 10 M gas); on Anvil with Osaka's EIP-7825 cap (2^24 gas a transaction)
a dispute at the cap is played to the end and the honest trainer is paid, while the second
`postChunk` of a job with the old largest chunk (65,536) cannot be sent at all."""
import os
import sys
from pathlib import Path

import pytest

from offchain.chain.backends import anvil
from offchain.chain.client import TransactionReverted
from offchain.chain.verde import CHUNK, Verde, commitments
from offchain.dispute.context import Context
from offchain.protocol import job as J
from offchain.protocol.dataset import write_job
from offchain.protocol.jobfile import load
from offchain.trainer import Trainer
from offchain.trainer import adversaries as A

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "protocol"))
from small_job import mlp_data  # noqa: E402

PAY, STAKE = 3 * 10**18, 10**18
TX_GAS_CAP = 2**24  # EIP-7825
MAX_CALLDATA, MAX_GAS = 100 * 1024, 10_000_000  # what every move must stay under (docs/PROTOCOL.md §3)


def test_the_schema_and_the_registry_share_one_cap_a_power_of_two(embedded):
    v = Verde.deploy(embedded)
    cap = embedded.call(v.registry.functions.MAX_CHUNK())
    assert cap == J.MAX_CHUNK and cap & (cap - 1) == 0


def test_a_job_file_above_the_cap_is_refused_naming_it(setup):
    job = setup[0]
    spec = J.dump(job.spec)
    assert J.parse(spec.replace(f"chunk: {job.spec.chunk}", f"chunk: {J.MAX_CHUNK}")).chunk == J.MAX_CHUNK
    with pytest.raises(J.JobError, match=f"chunk {J.MAX_CHUNK + 1} is above the cap of {J.MAX_CHUNK} elements"):
        J.parse(spec.replace(f"chunk: {job.spec.chunk}", f"chunk: {J.MAX_CHUNK + 1}"))


def test_the_registry_refuses_terms_above_the_cap(embedded, setup):
    """A client that posts directly, not through the schema."""
    job, ctx, _, _ = setup
    v = Verde.deploy(embedded)
    terms = list(commitments(job, ctx))
    terms[CHUNK] = J.MAX_CHUNK + 1
    now = embedded.now()
    fn = v.registry.functions.post((*terms, 3, STAKE, now + 600, now + 1200, now + 1800, 3600))
    with pytest.raises(TransactionReverted) as e:
        embedded.transact(fn, sender=embedded.accounts[1], value=PAY)
    assert e.value.error == "BadTerms" and "MAX_CHUNK" in e.value.args_[0]


@pytest.fixture(scope="module")
def osaka(artifacts):
    """Anvil at Osaka with EIP-7825's per-transaction gas cap on; our transactions ask for the cap."""
    with anvil(artifacts, hardfork="osaka", extra_args=("--enable-tx-gas-limit",)) as chain:
        chain.gas = TX_GAS_CAP
        yield chain


@pytest.fixture(scope="module")
def largest(tmp_path_factory):
    """A job at the largest chunk whose tensors fill it (the first layer's activations are 32 x
    64 = 2,048 elements), an honest trainer and one whose GELU output (node 2) is wrong in one
    element: the dispute reveals that tensor's one full chunk."""
    d = tmp_path_factory.mktemp("largest")
    job = load(write_job(d / "job", "mlp", {"d_in": 64, "d_hidden": 64, "n_classes": 10}, mlp_data(n=128, d=64),
                         steps=4, batch_size=32, fanout=2, chunk=J.MAX_CHUNK))
    honest, bad = Trainer(job, d / "honest", "honest"), Trainer(job, d / "bad", "cheater",
                                                                 behaviour=A.CorruptValue(step=2, node=2, element=1500,
                                                                                          ulps=64))
    honest.train()
    assert bad.train() != honest.final_claim()
    return job, Context(job), honest, bad


@pytest.mark.anvil
def test_a_dispute_at_the_largest_chunk_is_played_to_the_end_under_the_osaka_gas_cap(osaka, largest):
    job, ctx, honest, bad = largest
    v = Verde.deploy(osaka)
    client, a, b = osaka.accounts[1], osaka.accounts[2], osaka.accounts[3]
    seats = [(a, bad), (b, honest)]  # the cheater posts first wherever both move
    mark = len(osaka.gas_log)
    jid, _ = v.deliver(job, ctx, seats, PAY, STAKE, client)
    [r] = v.settle_disputes(jid, seats, ctx)
    assert r["winner"] == b.address and r["loser"] == a.address, r
    assert v.owed(b.address) == PAY + 2 * STAKE and v.owed(a.address) == 0
    moves = list(zip(osaka.gas_log[mark:], osaka.calldata_log[mark:]))
    chunks = [size for (what, _), size in moves if what == "postChunk()"]
    assert max(chunks) > 2 * J.MAX_CHUNK * 4  # the second poster passed both full chunks back
    assert max(size for _, size in moves) <= MAX_CALLDATA and max(gas for (_, gas), _ in moves) <= MAX_GAS, moves
    for what in ("postChunk()", "resolveStep()"):  # the figures docs/PROTOCOL.md §3 quotes (pytest -s prints them)
        size, gas = max((size, gas) for (w, gas), size in moves if w == what)
        print(f"largest {what}: {size:,} bytes of calldata, {gas:,} gas")


@pytest.mark.anvil
def test_a_move_above_the_cap_cannot_be_sent_under_the_osaka_gas_cap(osaka):
    """What the cap prevents: the second postChunk at the old largest chunk (65,536 float32 elements
    twice: 524 KB) needs some 21 M gas of calldata alone (EIP-7623's floor), above 2^24; asking for
    more than 2^24 is refused, and no gas limit at or below it covers the move."""
    v = Verde.deploy(osaka)
    big = os.urandom(65536 * 4)
    fn = v.operators.functions.postChunk(1, big, os.urandom(65536 * 4))
    sender = osaka.accounts[4]
    tx = {"to": v.operators.address, "data": fn._encode_transaction_data(), "value": 0, "chainId": osaka.chain_id,
          "nonce": osaka.w3.eth.get_transaction_count(sender.address), "maxFeePerGas": 50 * 10**9,
          "maxPriorityFeePerGas": 0}
    with pytest.raises(Exception, match="tx_gas_limit_cap"):
        osaka.w3.eth.send_raw_transaction(sender.sign_transaction({**tx, "gas": TX_GAS_CAP + 1}).raw_transaction)
    with pytest.raises(Exception, match="GasFloorMoreThanGasLimit"):
        osaka.w3.eth.call({"from": sender.address, "to": tx["to"], "data": tx["data"], "gas": TX_GAS_CAP})
    at_cap = v.operators.functions.postChunk(1, big[:J.MAX_CHUNK * 8], big[:J.MAX_CHUNK * 8])  # two int64 chunks
    with pytest.raises(TransactionReverted) as e:  # it reaches the contract, which refuses it by name (no match 1)
        osaka.call(at_cap, sender)
    assert e.value.error == "WrongPhase", e.value
