"""A connected chain: web3 + funded local accounts + deploy/transact/call that decode
custom-error reverts the same way on every backend."""
from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field

from eth_account.signers.local import LocalAccount
from eth_utils import function_abi_to_4byte_selector
from hexbytes import HexBytes
from web3 import Web3
from web3.exceptions import ContractCustomError, ContractLogicError, TransactionNotFound

from .compiler import Artifacts, compile_contracts
from .errors import ChainError, ChainUnavailable, TransactionReverted

RECEIPT_TIMEOUT_S = 120  # a node that answers but mines no block this long while a transaction waits: NotMining
REPLACE_AFTER_S = 30  # a real node: a transaction not mined this long (and passed over by a block) is replaced
LOCAL_REPLACE_AFTER_S = 5  # a local chain mines on each transaction (or every few seconds)
BUMP_NUM, BUMP_DEN = 9, 8  # a replacement raises both fee fields by 12.5%: geth and Anvil refuse one under +10%
DEFAULT_MAX_FEE_GWEI = 500  # the fee ceiling unless --max-fee-gwei or VERDE_MAX_FEE_GWEI says otherwise
DEFAULT_TIP = 10**9  # wei per gas, when the node suggests none (ethers' default)
ALREADY_KNOWN = ("already known", "already imported", "known transaction", "alreadyknown")
NONCE_USED = ("nonce too low", "nonce has already been used", "nonce is too low", "oldnonce")
UNDERPRICED = ("underpriced", "less than block base fee", "fee cap less than block base fee", "feecaptoolow",
               "max fee per gas less than")


class FeeCeilingReached(ChainError):
    """A transaction is not mined at the most this key may pay per gas (`Chain.max_fee_wei`,
    or less where its balance covers less: Chain._cap). Not a lost node: the agent retries,
    replacing it at the same nonce."""


class NotMining(ChainError):
    """The node answers but produces no blocks: not a lost node either."""


class EarlierTransactionMined(ChainError):
    """A transaction an earlier call left waiting at this nonce was mined instead of this one."""


def _ceil_ratio(x: int, num: int, den: int) -> int:
    return -(-x * num // den)


def first_fees(base_fee: int, tip_now: int, ceiling: int) -> tuple[int, int]:
    """(maxFeePerGas, maxPriorityFeePerGas) of a first send on a real node, as ethers prices
    one: the node's suggested tip (DEFAULT_TIP when it has none), and 2x the base fee + the
    tip (six full blocks of headroom), no more than the ceiling."""
    tip = tip_now if tip_now > 0 else DEFAULT_TIP
    fee = min(2 * base_fee + tip, ceiling)
    return fee, min(tip, fee)


def bump_fees(fee: int, tip: int, base_fee: int, tip_now: int, ceiling: int) -> tuple[int, int] | None:
    """Fees of a replacement of a transaction sent at (fee, tip): each raised by 12.5% at
    least and to today's price (2x `base_fee` + today's tip) if that is higher, the fee at
    most `ceiling`. None when the ceiling leaves less than the +10% (and strictly more, on
    both fields) that nodes require of a replacement."""
    new_tip = max(_ceil_ratio(tip, BUMP_NUM, BUMP_DEN), tip + 1, tip_now)
    new_fee = min(max(_ceil_ratio(fee, BUMP_NUM, BUMP_DEN), fee + 1, 2 * base_fee + new_tip), ceiling)
    new_tip = min(new_tip, new_fee)
    if new_fee < max(_ceil_ratio(fee, 11, 10), fee + 1) or new_tip < max(_ceil_ratio(tip, 11, 10), tip + 1):
        return None
    return new_fee, new_tip


@dataclass
class _Pending:
    """What one key has sent at one nonce and not yet seen mined."""
    addr: str
    nonce: int
    what: str
    call: tuple  # (to, data, value) of the action now sent at this nonce
    fee: int
    tip: int
    sent: dict  # every hash sent at this nonce -> (what, call): any one of them may be mined
    at: float = 0.0  # monotonic time of the last send
    block: int | None = None  # the block number then
    block_at: float | None = None  # when that block number was last seen to change
    ceiling_at: float | None = None  # since when no bump was possible
    raw: bytes = b""  # the last transaction sent, signed
    rebroadcast_at: float = 0.0


def max_fee_from_env() -> int:
    raw = os.environ.get("VERDE_MAX_FEE_GWEI")
    if not raw:
        return DEFAULT_MAX_FEE_GWEI * 10**9
    try:
        value = float(raw)
        assert value > 0
    except (ValueError, AssertionError):
        raise ChainError(f"VERDE_MAX_FEE_GWEI={raw!r} is not a positive number of gwei",
                         f"set it to e.g. {DEFAULT_MAX_FEE_GWEI}, or unset it") from None
    return int(value * 10**9)


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
    max_fee_wei: int | None = None  # the most a transaction may pay per gas (None: VERDE_MAX_FEE_GWEI, or 500 gwei)
    replace_after_s: float | None = None  # a transaction not mined this long is replaced (None: by `local`)
    _closer: object = None
    gas_log: list = field(default_factory=list)
    calldata_log: list = field(default_factory=list)

    def __post_init__(self):
        if self.local is None:
            self.local = self.backend in ("embedded", "anvil")
        if not self.local:
            self.gas = None  # a real node: estimate gas per transaction
        if self.max_fee_wei is None:
            self.max_fee_wei = max_fee_from_env()
        if self.replace_after_s is None:
            self.replace_after_s = LOCAL_REPLACE_AFTER_S if self.local else REPLACE_AFTER_S
        self.poll_s = 0.1 if self.local else 1.0
        self._errors = error_selectors(self.artifacts)
        self._chain_id = None
        self._pending: dict[str, _Pending] = {}  # key -> what it sent and has not seen mined
        self._next_nonce: dict[str, int] = {}  # key -> the nonce after its last mined transaction
        self._locks: dict[str, threading.Lock] = {}

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
        with self._locks.setdefault(sender.address, threading.Lock()):  # one nonce at a time per key
            receipt = self._send_at_nonce(what, tx, sender)
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

    # The transaction policy (docs: README "How an agent's transactions get mined"). A
    # transaction not mined `replace_after_s` after it was sent, with a block mined meanwhile,
    # is sent again at the SAME nonce with both fee fields raised by 12.5% or to 2x the base
    # fee + today's tip (geth and Anvil refuse a replacement under +10%), up to the ceiling
    # `max_fee_wei`; every hash sent stays watched (any of them may be mined). The next nonce
    # is the key's mined count (or the last one this process saw mined, +1), never the pool's
    # pending count: a transaction that waits is replaced by the next action, not queued behind.
    def _send_at_nonce(self, what: str, tx: dict, sender: LocalAccount):
        addr = sender.address
        call = (tx.get("to"), bytes(HexBytes(tx.get("data", b""))), tx.get("value", 0))
        mined = self.w3.eth.get_transaction_count(addr, "latest")
        p = self._pending.get(addr)
        if p is not None and mined > p.nonce:  # what an earlier call left waiting was mined since
            self._pending.pop(addr)
            self._next_nonce[addr] = max(self._next_nonce.get(addr, 0), p.nonce + 1)
            p = None
        if self.gas is not None:
            tx.setdefault("gas", self.gas)
        elif "gas" not in tx:  # a real node: estimate, with headroom
            tx["gas"] = self.w3.eth.estimate_gas({**tx, "from": addr}) * 6 // 5
        if p is not None and p.call == call and p.sent:
            state = p  # the same action again (an agent's retried tick): wait on what was sent
        else:
            if p is not None:  # another action while one waits: it takes that nonce, with higher fees
                state = _Pending(addr, p.nonce, what, call, p.fee, p.tip, dict(p.sent))
                fees = self._bumped(state, what, tx, sender)
            else:
                state = _Pending(addr, max(mined, self._next_nonce.get(addr, 0)), what, call, 0, 0, {})
                fees = self._first_fees(tx, sender)
            self._pending[addr] = state
            try:
                self._push(state, tx, sender, *fees)
            except BaseException:
                if not state.sent:  # nothing went out at this nonce
                    self._pending.pop(addr, None)
                raise
        while True:
            got = self._mined(state)
            if got is not None:
                return self._done(state, *got)
            now = time.monotonic()
            if state.block is None:  # not mined at once on a local chain: its block number counts from here
                state.block, state.block_at = self.w3.eth.block_number, now
            elif now - state.at >= self.replace_after_s:
                block = self.w3.eth.block_number
                if block != state.block:  # blocks were mined without it: raise its fees
                    state.block, state.block_at = block, now
                    if self._replace(state, tx, sender):
                        continue
                    if state.ceiling_at is None:
                        state.ceiling_at = now
                    elif now - state.ceiling_at > max(self.replace_after_s, 4 * self.poll_s):
                        _, limit, fix = self._cap(tx, sender)
                        raise FeeCeilingReached(
                            f"{what} (nonce {state.nonce} of {addr}) is not mined at {limit} (base fee now "
                            f"{self._base_fee() / 1e9:g} gwei); it stays in the node's pool and may still be mined",
                            f"{fix}; a retried or restarted agent replaces the waiting transaction at the same nonce")
                elif now - state.rebroadcast_at >= self.replace_after_s:
                    # no block since: send the same bytes again (a node restarted without its pool,
                    # or one that mines only on a new transaction); 'already known' is fine
                    state.rebroadcast_at = now
                    self._rebroadcast(state, tx, sender)
                if now - state.block_at > RECEIPT_TIMEOUT_S:
                    raise NotMining(f"{what}: the {self.backend} node answers but mined no block for "
                                    f"{RECEIPT_TIMEOUT_S} s (nonce {state.nonce} of {addr} waits in its pool)",
                                    "check that the node is synced and producing blocks; the transaction is "
                                    "replaced at the same nonce when this is retried")
            time.sleep(self.poll_s)

    def _first_fees(self, tx: dict, sender: LocalAccount) -> tuple[int, int]:
        if self.local:  # one request less per transaction
            return tx.get("maxFeePerGas", LOCAL_MAX_FEE), tx.get("maxPriorityFeePerGas", 0)
        if "maxFeePerGas" in tx:
            return tx["maxFeePerGas"], tx.get("maxPriorityFeePerGas", 0)
        return first_fees(self._base_fee(), self._tip_now(), self._cap(tx, sender)[0])

    def _base_fee(self) -> int:
        return int(self.w3.eth.get_block("latest").get("baseFeePerGas") or 0)

    def _tip_now(self) -> int:
        try:
            return int(self.w3.eth.max_priority_fee)
        except (ConnectionError, OSError):
            raise
        except Exception:  # a node without eth_maxPriorityFeePerGas
            return 0

    def _cap(self, tx: dict, sender: LocalAccount) -> tuple[int, str, str]:
        """The most this transaction may bid per gas: the ceiling, or less where the key's balance
        holds less than its gas limit x the ceiling (a node refuses a bid the sender cannot cover:
        a spike would leave the key refused at every bump, not bidding what it has).
        -> (wei per gas, what limits it, the fix)."""
        have = self.w3.eth.get_balance(sender.address) - tx.get("value", 0)
        afford = max(0, have) // max(1, tx["gas"])
        if afford < self.max_fee_wei:
            return afford, (f"{afford / 1e9:g} gwei per gas, all that {sender.address}'s {max(0, have) / 1e18:.6f} ETH "
                            f"covers for a gas limit of {tx['gas']:,}"), \
                "fund this key (the node refuses a fee the key cannot pay in full)"
        return self.max_fee_wei, f"the fee ceiling of {self.max_fee_wei / 1e9:g} gwei per gas", \
            "raise the ceiling (--max-fee-gwei or VERDE_MAX_FEE_GWEI; the key must hold gas x that fee)"

    def _bump(self, fee: int, tip: int, tx: dict, sender: LocalAccount) -> tuple[int, int] | None:
        """bump_fees of a transaction sent at (fee, tip), at today's base fee and tip, under _cap."""
        return bump_fees(fee, tip, self._base_fee(), self._tip_now(), self._cap(tx, sender)[0])

    def _bumped(self, state: "_Pending", what: str, tx: dict, sender: LocalAccount) -> tuple[int, int]:
        fees = self._bump(state.fee, state.tip, tx, sender)
        if fees is None:
            _, limit, fix = self._cap(tx, sender)
            raise FeeCeilingReached(
                f"{what}: nonce {state.nonce} holds a transaction at {state.fee / 1e9:g} gwei per gas, and replacing it "
                f"needs 10% more than {limit}", f"{fix}, or wait for the waiting one to be mined")
        return fees

    def _replace(self, state: "_Pending", tx: dict, sender: LocalAccount) -> bool:
        """Re-send at the same nonce with bumped fees; False: the cap allows no bump."""
        fees = self._bump(state.fee, state.tip, tx, sender)
        if fees is None:
            return False
        self._push(state, tx, sender, *fees)
        return True

    def _rebroadcast(self, state: "_Pending", tx: dict, sender: LocalAccount):
        try:
            self.w3.eth.send_raw_transaction(state.raw)
        except Exception as e:
            msg = str(e).lower()
            if any(m in msg for m in NONCE_USED):
                self._nonce_used(state)
            elif any(m in msg for m in UNDERPRICED):  # the base fee rose past it meanwhile
                self._replace(state, tx, sender)
            elif not any(m in msg for m in ALREADY_KNOWN):
                raise

    def _push(self, state: "_Pending", tx: dict, sender: LocalAccount, fee: int, tip: int):
        """Sign and send at state.nonce; a refusal for its price is answered with a bump (up to
        the ceiling), 'already known' is a send, and 'nonce too low' leaves the receipts of what
        was sent to say whether one of them was mined (no second copy of the action is sent)."""
        while True:
            signed = sender.sign_transaction({**tx, "nonce": state.nonce, "maxFeePerGas": fee,
                                              "maxPriorityFeePerGas": tip})
            try:
                self.w3.eth.send_raw_transaction(signed.raw_transaction)
            except Exception as e:
                msg = str(e).lower()
                if any(m in msg for m in ALREADY_KNOWN):
                    pass
                elif any(m in msg for m in NONCE_USED):
                    return self._nonce_used(state)
                elif any(m in msg for m in UNDERPRICED):
                    bumped = self._bump(fee, tip, tx, sender)
                    if bumped is None:
                        _, limit, fix = self._cap(tx, sender)
                        raise FeeCeilingReached(
                            f"{state.what}: the node refuses nonce {state.nonce} at {fee / 1e9:g} gwei per gas "
                            f"({str(e)[:200]}), and the most it may bid is {limit}", fix) from None
                    fee, tip = bumped
                    continue
                else:
                    raise
            state.sent[bytes(signed.hash)] = (state.what, state.call)
            state.fee, state.tip, state.raw = fee, tip, bytes(signed.raw_transaction)
            state.at = state.rebroadcast_at = time.monotonic()
            if state.block_at is None:  # (a local chain mines at once: it reads the block number only if not)
                state.block, state.block_at = None if self.local else self.w3.eth.block_number, state.at
            return

    def _nonce_used(self, state: "_Pending"):
        """The node says state.nonce is taken: one of ours was mined (the wait loop finds it),
        or another sender with this key took it."""
        for _ in range(3):
            if self._mined(state) is not None:
                return
            time.sleep(self.poll_s)
        if self._pending.get(state.addr) is state:
            self._pending.pop(state.addr)
        raise ChainError(f"{state.what}: nonce {state.nonce} of this key was used by a transaction this process did "
                         "not send", "use each key in one process only (verde key new makes another)")

    def _mined(self, state: "_Pending"):
        """(hash, receipt) of whichever transaction sent at state.nonce was mined, or None."""
        for h in list(state.sent):
            try:
                return h, self.w3.eth.get_transaction_receipt(h)
            except TransactionNotFound:
                continue
        return None

    def _done(self, state: "_Pending", h: bytes, receipt):
        if self._pending.get(state.addr) is state:
            self._pending.pop(state.addr)
        self._next_nonce[state.addr] = max(self._next_nonce.get(state.addr, 0), state.nonce + 1)
        what, call = state.sent[h]
        if call != state.call:
            if receipt["status"] == 1:  # what it cost is logged under its own name, as if it had been waited on
                self.gas_log.append((what, receipt["gasUsed"]))
                self.calldata_log.append(len(call[1]))  # (the two logs share their index)
            raise EarlierTransactionMined(
                f"{state.what} was not sent: {what}, an earlier transaction at the same nonce, was mined instead",
                "nothing to do: the next try reads the chain again")
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
