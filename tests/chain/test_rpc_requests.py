"""What the chain client asks a node: a rate-limited public RPC counts every request, and an
idle agent reads the chain every poll (offchain/cli/profiles.py poll_s)."""
from collections import Counter

import pytest


@pytest.mark.anvil
def test_a_connection_asks_the_chain_id_once_not_before_every_call(anvil, monkeypatch):
    """web3's request validation asked eth_chainId before each eth_call and transaction: 72 of
    the 126 requests of an idle agent's 10 s (benchmarks/agent_rpc.py). The connection keeps
    the answers a running node never changes (offchain/chain/backends.py)."""
    from offchain.chain.verde import Verde
    v = Verde.deploy(anvil)
    anvil.w3.eth.chain_id  # (asked once per connection, here or earlier in the session)
    asked, make = Counter(), anvil.w3.provider._make_request

    def counted(method, data):
        asked[method] += 1
        return make(method, data)
    monkeypatch.setattr(anvil.w3.provider, "_make_request", counted)
    for _ in range(5):
        v.chain.call(v.registry.functions.escrow())
    anvil.deploy("Float32Harness")  # (a transaction: signed with the chain id, its fees read)
    assert asked["eth_call"] >= 5 and asked["eth_sendRawTransaction"] == 1, asked
    assert asked["eth_chainId"] == 0 and asked["web3_clientVersion"] == 0, asked
