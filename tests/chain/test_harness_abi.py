"""chain/harness.py's numpy ABI words against web3's and eth_abi's own encoding, and its call
against the contract function's on both backends: the same bytes out, the same words back."""
import numpy as np
import pytest
from eth_abi import decode, encode
from web3 import Web3

from offchain.chain import TransactionReverted
from offchain.chain import harness


def _operands(rng, n):
    edges = np.array([0, 1, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF], np.uint32)
    return [np.concatenate([edges, rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)]) for _ in range(3)]


@pytest.mark.parametrize("n", [None, 0, 37])
def test_calldata_is_web3s_byte_for_byte(artifacts, n):
    h = Web3().eth.contract(address=Web3.to_checksum_address("0x" + "11" * 20), abi=artifacts["Float32Harness"].abi)
    a, b, c = (x[:0] for x in _operands(np.random.default_rng(0), 0)) if n is None else \
        _operands(np.random.default_rng(n), n)
    web3s = bytes.fromhex(h.functions.run(7, a.tolist(), b.tolist(), c.tolist())._encode_transaction_data()[2:])
    assert harness.encode_run(7, a, b, c) == web3s


def test_return_data_decodes_as_eth_abi_does():
    rng = np.random.default_rng(3)
    r, g = (rng.integers(0, 1 << 32, 50, dtype=np.uint64).astype(np.uint32) for _ in range(2))
    data = encode(["uint32[]", "uint32[]"], [r.tolist(), g.tolist()])
    got = harness.decode_run(data)
    assert [x.tolist() for x in got] == [list(v) for v in decode(["uint32[]", "uint32[]"], data)]
    assert got[0].view(np.uint32).tolist() == r.tolist() and got[1].tolist() == g.tolist()


def test_malformed_return_data_and_operands_are_refused():
    good = encode(["uint32[]", "uint32[]"], [[1, 2], [3, 4]])
    with pytest.raises(ValueError, match="two arrays"):
        harness.decode_run(good[:40])
    with pytest.raises(ValueError, match="no uint32"):
        harness.decode_run(good[:-32])  # the last array one word short
    wide = encode(["uint256[]", "uint32[]"], [[1 << 40], [1]])
    with pytest.raises(ValueError, match="above 2\\^32"):
        harness.decode_run(wide)
    for bad in (np.array([1.5], np.float32), np.array([-1]), np.array([1 << 32], np.int64), np.zeros((2, 2), np.uint32)):
        with pytest.raises(ValueError, match="uint32 words"):
            harness.encode_run(0, bad, np.zeros(1, np.uint32), np.zeros(1, np.uint32))


def test_the_fast_call_returns_what_the_contract_function_returns(chain):
    h = chain.deploy("Float32Harness")
    a, b, c = _operands(np.random.default_rng(9), 200)
    for opcode in (0, 3, 5):  # add, fma (three operands), sqrt (one)
        r, gas = harness.run(chain, h, opcode, a, b, c)
        want_r, want_gas = chain.call(h.functions.run(opcode, a.tolist(), b.tolist(), c.tolist()))
        assert r.dtype == np.uint32 and r.tolist() == want_r and gas.tolist() == want_gas


def test_a_revert_through_the_fast_call_is_the_named_error(chain):
    h = chain.deploy("Float32Harness")
    z = np.zeros(2, np.uint32)
    with pytest.raises(TransactionReverted) as e:
        harness.run(chain, h, 99, z, z, z)
    assert e.value.error == "UnknownPrimitive" and e.value.args_ == (99,)
