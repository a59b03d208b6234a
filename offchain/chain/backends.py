"""The three ways to get a Chain: `embedded` (in-process py-evm, the default), `anvil`
(a node we start and stop), `rpc URL` (any node; key from the environment/keystore)."""
from __future__ import annotations

import json
import os
from pathlib import Path

from eth_account import Account
from web3 import Web3

from .anvil import MNEMONIC, AnvilProcess
from .client import Chain
from .embedded import embedded_w3
from .embedded_node import CLIENT_VERSION
from .compiler import compile_contracts
from .errors import ChainError, ChainUnavailable, KeyLoadError

N_ACCOUNTS = 10
RPC_TIMEOUT_S = 10


# answers a node never changes while it runs, asked once per connection: web3's validation asked
# eth_chainId before every call, 72 of an idle agent's 126 requests in 10 s (a rate-limited public
# RPC counts each; benchmarks/agent_rpc.py). A node restarted with another chain id refuses our
# EIP-155 transactions.
_CACHED = {"eth_chainId", "web3_clientVersion", "net_version"}


def _http(url: str) -> Web3:
    return Web3(Web3.HTTPProvider(url, request_kwargs={"timeout": RPC_TIMEOUT_S}, cache_allowed_requests=True,
                                  cacheable_requests=_CACHED))


def _mnemonic_accounts(n: int = N_ACCOUNTS):
    Account.enable_unaudited_hdwallet_features()
    return [Account.from_mnemonic(MNEMONIC, account_path=f"m/44'/60'/0'/0/{i}") for i in range(n)]


def embedded(artifacts=None) -> Chain:
    return Chain(embedded_w3(), _mnemonic_accounts(), "embedded", artifacts or compile_contracts())


def _over_http(node, backend: str, artifacts) -> Chain:
    """A node we started (Anvil, or the embedded chain served by a process): its funded
    accounts, and it stops when the Chain is closed."""
    artifacts = artifacts or compile_contracts()  # compile errors before a node is started
    node.start()
    try:
        w3 = _http(node.url)
        chain = Chain(w3, _mnemonic_accounts(), backend, artifacts, local=True)
        chain._closer = node
        return chain
    except BaseException:
        node.stop()
        raise


def anvil(artifacts=None, port: int | None = None, extra_args: tuple = (), hardfork: str = "cancun") -> Chain:
    """extra_args: more anvil flags (e.g. --steps-tracing for opcode-level traces); hardfork:
    e.g. osaka, with --enable-tx-gas-limit for EIP-7825's 2^24 gas cap per transaction."""
    return _over_http(AnvilProcess(port=port, extra_args=extra_args, hardfork=hardfork), "anvil", artifacts)


def embedded_node(artifacts=None, port: int | None = None) -> Chain:
    from .embedded_node import EmbeddedNodeProcess
    return _over_http(EmbeddedNodeProcess(port=port), "embedded-node", artifacts)


def load_key() -> "Account":
    """VERDE_PRIVATE_KEY (hex), or VERDE_KEYSTORE (file) + VERDE_KEYSTORE_PASSWORD."""
    key = os.environ.get("VERDE_PRIVATE_KEY")
    if key:
        try:
            return Account.from_key(key)
        except Exception as e:
            raise KeyLoadError(f"VERDE_PRIVATE_KEY is not a valid secp256k1 private key ({type(e).__name__})",
                            "set it to 32 bytes of hex, with or without 0x") from None
    path = os.environ.get("VERDE_KEYSTORE")
    if path:
        try:
            blob = json.loads(Path(path).read_text())
        except (OSError, ValueError) as e:
            raise KeyLoadError(f"cannot read keystore {path}: {e}", "point VERDE_KEYSTORE at a JSON keystore file") from None
        try:
            return Account.from_key(Account.decrypt(blob, os.environ.get("VERDE_KEYSTORE_PASSWORD", "")))
        except ValueError:
            raise KeyLoadError(f"wrong password for keystore {path}", "set VERDE_KEYSTORE_PASSWORD") from None
    raise KeyLoadError("no key for the rpc backend", "set VERDE_PRIVATE_KEY, or VERDE_KEYSTORE and VERDE_KEYSTORE_PASSWORD")


class NoKey(list):
    """The accounts of a chain read without a key (status, watch, fetch need none): empty,
    and the first command that must sign says which key to set."""

    def __getitem__(self, i):
        raise KeyLoadError("this command sends transactions, and no key is set",
                           "set VERDE_PRIVATE_KEY, or VERDE_KEYSTORE and VERDE_KEYSTORE_PASSWORD (`verde key new` "
                           "makes one)")


def rpc(url: str, artifacts=None) -> Chain:
    if not url.startswith(("http://", "https://")):
        raise ChainError(f"RPC URL {url!r} is not an http(s) URL", "pass e.g. rpc:http://127.0.0.1:8545")
    keyed = any(os.environ.get(v) for v in ("VERDE_PRIVATE_KEY", "VERDE_KEYSTORE"))
    accounts = [load_key()] if keyed else NoKey()  # a key that is set but bad is an error now
    w3 = _http(url)
    try:
        w3.eth.chain_id
    except Exception as e:
        raise ChainUnavailable(f"cannot reach an Ethereum node at {url}: {type(e).__name__}: {e}",
                               "check the URL and that the node is running") from None
    try:
        version = str(w3.client_version)
    except Exception:
        version = ""
    local = version.startswith((CLIENT_VERSION, "anvil"))  # a test node: fixed gas and fee, a movable clock
    return Chain(w3, accounts, f"rpc {url}", artifacts or compile_contracts(), local=local)


def connect(spec: str = "embedded", artifacts=None) -> Chain:
    """`embedded` | `embedded-node[:PORT]` | `anvil[:PORT]` | `rpc:URL` | a bare http(s) URL.
    `embedded` lives in this process; `embedded-node` serves it from a child process, so
    that other processes (agents) can share it over `rpc:URL`."""
    if spec == "embedded":
        return embedded(artifacts)
    name, _, port = spec.partition(":")
    if name in ("embedded-node", "anvil"):
        if port and not (port.isdigit() and 0 < int(port) < 65536):
            raise ChainError(f"bad port in {spec!r}", f"use {name} or {name}:PORT with a port from 1 to 65535")
        return (embedded_node if name == "embedded-node" else anvil)(artifacts, int(port) if port else None)
    if spec.startswith("rpc:"):
        return rpc(spec[4:], artifacts)
    if spec.startswith(("http://", "https://")):
        return rpc(spec, artifacts)
    raise ChainError(f"unknown chain backend {spec!r}", "use embedded, embedded-node[:PORT], anvil[:PORT] or rpc:URL")
