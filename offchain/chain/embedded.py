"""The embedded chain: py-evm in process (eth-tester), with Anvil's mnemonic and gas limit so
every local backend has the same funded accounts. Served over HTTP by embedded_node.py."""
from __future__ import annotations

from web3 import Web3

from .anvil import GAS_LIMIT, MNEMONIC


def embedded_w3() -> Web3:
    from eth_tester import EthereumTester, PyEVMBackend
    from web3.providers.eth_tester import EthereumTesterProvider

    genesis = PyEVMBackend.generate_genesis_params(overrides={"gas_limit": GAS_LIMIT})
    # Same mnemonic and HD path as Anvil: the same funded accounts on every local backend.
    backend = PyEVMBackend(genesis_parameters=genesis, mnemonic=MNEMONIC, hd_path="m/44'/60'/0'/0")
    return Web3(EthereumTesterProvider(EthereumTester(backend)))
