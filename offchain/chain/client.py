"""A connected chain: web3 + funded local accounts + deploy/transact/call that decode
custom-error reverts the same way on every backend."""
from __future__ import annotations

from dataclasses import dataclass, field

from eth_account.signers.local import LocalAccount
from eth_utils import function_abi_to_4byte_selector
from hexbytes import HexBytes
from web3 import Web3
from web3.exceptions import ContractCustomError, ContractLogicError, TimeExhausted

from .compiler import Artifacts, compile_contracts
from .errors import ChainError, ChainUnavailable, TransactionReverted

RECEIPT_TIMEOUT_S = 120


def error_selectors(artifacts: Artifacts) -> dict[bytes, dict]:
    """4-byte selector -> error ABI entry, over every compiled contract."""
    out = {}
    for art in artifacts.values():
        for item in art.abi:
            if item["type"] == "error":
                out[function_abi_to_4byte_selector(item)] = item
    return out


def _revert_data(exc: Exception) -> bytes:
    """py-evm raises TransactionFailed with the raw bytes; Anvil gives ContractCustomError
    with hex data. Both are reduced to the raw revert bytes here."""
    data = getattr(exc, "data", None)
    if data is None and exc.args:
        data = exc.args[0]
    if isinstance(data, (bytes, bytearray)):
        return bytes(data)
    if isinstance(data, str) and data.startswith("execution reverted: b"):
        # eth-tester puts the bytes' repr into the message
        import ast
        try:
            return bytes(ast.literal_eval(data[len("execution reverted: "):]))
        except (ValueError, SyntaxError):
            return b""
    if isinstance(data, str) and data.startswith("0x"):
        try:
            return bytes.fromhex(data[2:])
        except ValueError:
            return b""
    return b""


LOCAL_MAX_FEE = 50 * 10**9  # wei per gas: far above a local chain's base fee, affordable for its accounts


@dataclass
class Chain:
    """A connected chain. Transactions are signed locally (the same code path for every
    backend); `gas_log` keeps (what, gasUsed) of every mined transaction, for reports, and
    `calldata_log` its calldata bytes (same index)."""
    w3: Web3
    accounts: list[LocalAccount]
    backend: str
    artifacts: Artifacts = field(default_factory=compile_contracts)
    gas: int | None = 30_000_000  # explicit limit: estimate_gas on py-evm is very slow
    local: bool | None = None  # a test chain (fixed fee cap, movable clock); None: by backend name
    _closer: object = None
    gas_log: list = field(default_factory=list)
    calldata_log: list = field(default_factory=list)

    def __post_init__(self):
        if self.local is None:
            self.local = self.backend in ("embedded", "anvil")
        if not self.local:
            self.gas = None  # a real node: estimate gas per transaction
        self._errors = error_selectors(self.artifacts)
        self._chain_id = None

    @property
    def chain_id(self) -> int:
        if self._chain_id is None:
            self._chain_id = self.w3.eth.chain_id
        return self._chain_id

    # -- errors ---------------------------------------------------------------------
    def decode_revert(self, what: str, exc: Exception) -> TransactionReverted:
        raw = _revert_data(exc)
        abi = self._errors.get(raw[:4])
        if abi is None:
            return TransactionReverted(what, None, raw=raw)
        from eth_abi import decode
        types = [i["type"] for i in abi["inputs"]]
        return TransactionReverted(what, abi["name"], tuple(decode(types, raw[4:])), raw)

    def _guard(self, what, fn):
        try:
            return fn()
        except (ContractCustomError, ContractLogicError) as e:
            raise self.decode_revert(what, e) from None
        except Exception as e:  # py-evm's TransactionFailed, or the node went away
            if type(e).__name__ == "TransactionFailed":
                raise self.decode_revert(what, e) from None
            if isinstance(e, (ConnectionError, OSError)) or "Connection" in type(e).__name__:
                check = getattr(self._closer, "check_alive", None)
                if check:
                    check()
                raise ChainUnavailable(f"lost the connection to the {self.backend} chain during {what}: {e}",
                                       "check that the node is still running") from None
            raise

    # -- transactions ---------------------------------------------------------------
    def _send(self, what: str, tx: dict, sender: LocalAccount):
        try:
            return self._guard(what, lambda: self._send_unguarded(what, tx, sender))
        except ChainError:
            raise
        except Exception as e:  # a node's refusal before mining: say which key and what it lacks
            if "insufficient funds" not in str(e).lower() and "lack of funds" not in str(e).lower():
                raise
            have = self.w3.eth.get_balance(sender.address)
            raise ChainError(f"{sender.address} cannot pay for {what}: it holds {have / 1e18:.6f} ETH, less than the "
                             f"{tx.get('value', 0) / 1e18:g} ETH sent plus gas", "fund this key, or use a funded one "
                             "(VERDE_PRIVATE_KEY)") from None

    def _send_unguarded(self, what: str, tx: dict, sender: LocalAccount):
        tx.setdefault("chainId", self.chain_id)
        tx["nonce"] = self.w3.eth.get_transaction_count(sender.address, "pending")
        if self.gas is not None:
            tx.setdefault("gas", self.gas)
        elif "gas" not in tx:  # a real node: estimate, with headroom
            tx["gas"] = self.w3.eth.estimate_gas({**tx, "from": sender.address}) * 6 // 5
        tx.setdefault("maxPriorityFeePerGas", 0)
        if self.local:  # one request less per transaction
            tx.setdefault("maxFeePerGas", LOCAL_MAX_FEE)
        else:
            tx.setdefault("maxFeePerGas", 2 * self.w3.eth.get_block("latest")["baseFeePerGas"] + 1)
        signed = sender.sign_transaction(tx)
        txh = self.w3.eth.send_raw_transaction(signed.raw_transaction)
        try:
            receipt = self.w3.eth.wait_for_transaction_receipt(txh, timeout=RECEIPT_TIMEOUT_S)
        except TimeExhausted:
            raise ChainUnavailable(f"{what}: no receipt within {RECEIPT_TIMEOUT_S} s for 0x{txh.hex()}",
                                   "the node is not mining; check it") from None
        if receipt["status"] != 1:
            # Replay to recover the revert data: first on the state after its own block (a
            # reverted tx changed nothing, and the block's timestamp is the one it saw: a move
            # that came too late reverts only there), then on the parent state. Each tx is its
            # own block on the local chains; on a public chain this is a best effort.
            call = {k: tx[k] for k in ("to", "data", "value") if k in tx}
            call["from"] = sender.address
            for block in (receipt["blockNumber"], receipt["blockNumber"] - 1):
                self.w3.eth.call(call, block)
            raise TransactionReverted(what, None)
        self.gas_log.append((what, receipt["gasUsed"]))
        self.calldata_log.append(len(HexBytes(tx.get("data", b""))))
        return receipt

    def deploy(self, name: str, *args, sender: LocalAccount | None = None, value: int = 0):
        return self.create(name, *args, sender=sender, value=value)[0]

    def create(self, name: str, *args, sender: LocalAccount | None = None, value: int = 0):
        """Deploy `name` -> (the contract, its creation receipt)."""
        art = self.artifacts[name]
        sender = sender or self.accounts[0]
        factory = self.w3.eth.contract(abi=art.abi, bytecode=art.bytecode)
        # Encoded locally: building the transaction must not touch the node.
        tx = {"data": factory.constructor(*args).data_in_transaction, "value": value}
        receipt = self._send(f"deploy {name}", tx, sender)
        return self.w3.eth.contract(address=receipt["contractAddress"], abi=art.abi), receipt

    def transact(self, fn, sender: LocalAccount | None = None, value: int = 0):
        """Send a contract function call (web3 ContractFunction) as a signed transaction."""
        sender = sender or self.accounts[0]
        what = f"{fn.fn_name}()"
        tx = {"to": fn.address, "data": fn._encode_transaction_data(), "value": value}
        return self._send(what, tx, sender)

    def call(self, fn, sender: LocalAccount | None = None):
        """A read; from `sender`, else the first account, else (a chain read without a key) nobody."""
        sender = sender or (self.accounts[0] if self.accounts else None)
        tx = {"gas": self.gas or 30_000_000, **({"from": sender.address} if sender else {})}
        return self._guard(f"{fn.fn_name}() call", lambda: fn.call(tx))

    def call_data(self, to: str, data: bytes, what: str, sender: LocalAccount | None = None) -> bytes:
        """A read with calldata encoded by the caller (chain/harness.py: arrays too large for
        web3's per-element encoding); the raw return data."""
        sender = sender or (self.accounts[0] if self.accounts else None)
        tx = {"to": to, "data": HexBytes(data), "gas": self.gas or 30_000_000,
              **({"from": sender.address} if sender else {})}
        return bytes(self._guard(what, lambda: self.w3.eth.call(tx)))

    def now(self) -> int:
        """The latest block's timestamp (what deadlines are compared with)."""
        return int(self.w3.eth.get_block("latest")["timestamp"])

    def advance(self, seconds: int) -> int:
        """Move the chain's clock forward and mine a block (local backends only)."""
        target = self.now() + int(seconds)
        if self.backend == "embedded":
            tester = self.w3.provider.ethereum_tester
            tester.time_travel(target)
            tester.mine_blocks(1)
        elif self.local:  # Anvil, or the embedded node
            for method, params in (("evm_setNextBlockTimestamp", [target]), ("evm_mine", [])):
                out = self._guard(method, lambda: self.w3.provider.make_request(method, params))
                if "error" in out:
                    raise ChainError(f"{self.backend} refused {method}: {out['error']}")
        else:
            raise ChainError(f"cannot move the clock of a {self.backend} chain; wait for the deadline instead")
        return self.now()

    def close(self):
        closer, self._closer = self._closer, None
        if closer is not None:
            closer.stop()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
