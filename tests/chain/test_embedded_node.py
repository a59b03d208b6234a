"""The embedded chain served over JSON-RPC by its own process (`embedded-node`): what the
agents of the main job share. Differential: the same transactions through the node and
in process give the same results, the same decoded custom errors, the same gas."""
import json
import os
import urllib.request

import pytest

from offchain.chain import ChainError, TransactionReverted, connect
from offchain.chain.embedded_node import EmbeddedNode, to_rpc
from offchain.chain.verde import Verde


@pytest.fixture(scope="module")
def served(artifacts):
    with connect("embedded-node", artifacts) as chain:
        yield chain


def _raw(url, body: bytes):
    req = urllib.request.Request(url, body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


def test_same_results_errors_and_gas_as_in_process(served, artifacts):
    with connect("embedded", artifacts) as local:
        outs = []
        for chain in (served, local):
            v = Verde.deploy(chain)
            with pytest.raises(TransactionReverted) as sent:
                chain.transact(v.registry.functions.withdraw(), sender=chain.accounts[3])
            with pytest.raises(TransactionReverted) as called:
                chain.call(v.registry.functions.withdraw(), sender=chain.accounts[3])
            outs.append(([g for _, g in chain.gas_log[-5:]], sent.value.error, sent.value.args, called.value.error,
                         v.owed(chain.accounts[3].address)))
        assert outs[0] == outs[1]
        assert outs[0][1] == "NothingOwed"


def test_another_process_sees_the_same_chain_and_can_move_its_clock(served):
    v = Verde.deploy(served)
    os.environ["VERDE_PRIVATE_KEY"] = served.accounts[5].key.hex()
    try:
        other = connect(f"rpc:{served._closer.url}", served.artifacts)
    finally:
        del os.environ["VERDE_PRIVATE_KEY"]
    assert other.local and other.gas is not None  # recognized as a test node: fixed gas, no estimate
    assert Verde.attach(other, v.addresses()).registry.address == v.registry.address
    t = other.now()
    assert other.advance(3600) >= t + 3600
    assert served.now() >= t + 3600


def test_wire_format_is_standard_json_rpc(served):
    url = served._closer.url
    v = Verde.deploy(served)
    block = _raw(url, json.dumps({"jsonrpc": "2.0", "id": 7, "method": "eth_getBlockByNumber",
                                  "params": ["latest", True]}).encode())
    assert block["id"] == 7
    tx = block["result"]["transactions"][0]
    assert tx["input"].startswith("0x") and "data" not in tx and "blockHash" in tx  # calldata is `input`, camelCase
    assert block["result"]["number"].startswith("0x")  # quantities are hex
    assert tx["to"].lower() == v.game.address.lower() or tx["to"].lower() == v.registry.address.lower()
    batch = _raw(url, json.dumps([{"jsonrpc": "2.0", "id": i, "method": "eth_chainId", "params": []}
                                  for i in range(2)]).encode())
    assert [b["id"] for b in batch] == [0, 1] and batch[0]["result"] == hex(served.chain_id)
    assert _raw(url, b"{not json")["error"]["code"] == -32700
    assert _raw(url, json.dumps({"id": 1}).encode())["error"]["code"] == -32600
    assert _raw(url, json.dumps({"id": 1, "method": "eth_noSuchMethod", "params": []}).encode())["error"]
    assert _raw(url, json.dumps({"id": 2, "method": "eth_chainId", "params": []}).encode())["result"]  # still serving


def test_to_rpc_encodes_every_kind_of_value():
    assert to_rpc({"block_number": 255, "ok": True, "raw": b"\x01\x02", "x": None, "logs": [{"log_index": 0}]}) == \
        {"blockNumber": "0xff", "ok": True, "raw": "0x0102", "x": None, "logs": [{"logIndex": "0x0"}]}
    with pytest.raises(TypeError):
        to_rpc(object())


def test_node_answers_a_bad_request_without_dying():
    from offchain.chain.embedded import embedded_w3
    node = EmbeddedNode(embedded_w3())
    bad = node.answer({"id": 3, "method": "eth_sendRawTransaction", "params": ["0x00"]})
    assert bad["id"] == 3 and bad["error"]["code"] == -32000
    assert node.answer({"id": 4, "method": "eth_blockNumber", "params": []})["result"] == "0x0"


def test_bad_port_spec_is_a_clear_error():
    with pytest.raises(ChainError, match="bad port"):
        connect("embedded-node:abc")


@pytest.mark.parametrize("kind", ["embedded", pytest.param("anvil", marks=pytest.mark.anvil)])
def test_a_node_with_a_block_time_keeps_its_clock_moving_while_idle(artifacts, kind):
    """Issue #22: agents read time from the latest block; a node that mines only on a
    transaction lets deadlines pass unseen. With a block time, an idle chain's clock keeps
    pace with the wall clock (and keeps an offset it was moved by), and transactions still
    go through."""
    import time
    from web3 import Web3
    from offchain.chain import AnvilProcess, Chain
    from offchain.chain.backends import _mnemonic_accounts
    from offchain.chain.embedded_node import EmbeddedNodeProcess
    node = (EmbeddedNodeProcess(block_time=0.5) if kind == "embedded" else
            AnvilProcess(extra_args=("--block-time", "0.5", "--mixed-mining")))
    with node:
        chain = Chain(Web3(Web3.HTTPProvider(node.url)), _mnemonic_accounts(), "anvil", artifacts)
        t0, b0 = chain.now(), chain.w3.eth.block_number
        chain.advance(1000)
        time.sleep(2.6)
        assert chain.w3.eth.block_number >= b0 + 3, "no blocks while idle"
        assert chain.now() >= t0 + 1000 + 2, "the clock did not move with the wall clock"
        start = time.time()
        Verde.deploy(chain)
        assert time.time() - start < 8, "transactions wait for the interval"
