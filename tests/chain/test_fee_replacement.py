"""A transaction that a base-fee spike passes over is replaced at its own nonce with higher
fees, not left to make the node look gone (red team: an honest agent lost its stake to a gas
spike: a 0 tip and a 2x base-fee cap, a 120 s wait reported as an unreachable node, and every
retry queued at the next nonce behind the stuck one)."""
import threading
import time

import pytest

from offchain.chain import client
from offchain.chain.client import Chain, FeeCeilingReached, bump_fees, first_fees

G = 10**9


# -- the fee arithmetic ------------------------------------------------------------------

def _replaces(old, new):
    """geth's rule for a replacement (legacypool, price bump 10%): both fields >= +10%, and higher."""
    (fee, tip), (nfee, ntip) = old, new
    return nfee >= fee * 110 // 100 and ntip >= tip * 110 // 100 and nfee > fee and ntip > tip


@pytest.mark.parametrize("fee,tip,base,tip_now", [
    (50 * G, 0, 1 * G, 1 * G),          # a local chain's first send (tip 0)
    (21 * G, 1 * G, 10 * G, 1 * G),     # base fee unchanged: +12.5% on both
    (21 * G, 1 * G, 100 * G, 2 * G),    # a spike: to 2x today's base fee + today's tip
    (7, 0, 0, 0),                       # tiny values still rise
    (100 * G, 99 * G, 1 * G, 0),        # tip near the fee
])
def test_a_bump_raises_both_fee_fields_by_at_least_ten_percent(fee, tip, base, tip_now):
    new = bump_fees(fee, tip, base, tip_now, ceiling=10**6 * G)
    assert new is not None and _replaces((fee, tip), new)
    nfee, ntip = new
    assert ntip <= nfee
    assert nfee >= 2 * base + min(ntip, tip_now)  # at least today's price
    assert nfee >= -(-fee * 9 // 8) and ntip >= -(-tip * 9 // 8)  # 12.5%: a margin over the 10% rule


def test_a_bump_stops_at_the_ceiling():
    ceiling = 500 * G
    new = bump_fees(100 * G, 2 * G, 400 * G, 2 * G, ceiling)  # today's price 802 gwei: capped
    assert new == (ceiling, -(-2 * G * 9 // 8)) and _replaces((100 * G, 2 * G), new)
    assert bump_fees(460 * G, 2 * G, 400 * G, 2 * G, ceiling) is None  # +10% would pass the ceiling
    assert bump_fees(ceiling, 2 * G, 1 * G, 2 * G, ceiling) is None
    fee, tip = 1 * G, 0
    for _ in range(200):  # repeated bumps reach the ceiling and stop there
        nxt = bump_fees(fee, tip, 1 * G, 1 * G, ceiling)
        if nxt is None:
            break
        assert _replaces((fee, tip), nxt) and nxt[0] <= ceiling
        fee, tip = nxt
    else:
        pytest.fail("no end to the bumps")
    assert fee > ceiling * 10 // 11


def test_a_first_send_has_a_tip_and_room_for_six_full_blocks():
    assert first_fees(10 * G, 0, 500 * G) == (20 * G + client.DEFAULT_TIP, client.DEFAULT_TIP)  # never tip 0
    assert first_fees(10 * G, 3 * G, 500 * G) == (23 * G, 3 * G)
    assert first_fees(300 * G, 3 * G, 500 * G) == (500 * G, 3 * G)  # no more than the ceiling


def test_the_ceiling_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("VERDE_MAX_FEE_GWEI", "42.5")
    assert client.max_fee_from_env() == 42_500_000_000
    monkeypatch.setenv("VERDE_MAX_FEE_GWEI", "lots")
    with pytest.raises(client.ChainError, match="VERDE_MAX_FEE_GWEI"):
        client.max_fee_from_env()
    monkeypatch.delenv("VERDE_MAX_FEE_GWEI")
    assert client.max_fee_from_env() == client.DEFAULT_MAX_FEE_GWEI * G


# -- on Anvil -----------------------------------------------------------------------------

@pytest.fixture
def node(artifacts, monkeypatch):
    """A node of its own (these tests turn its mining off), and a short wait before replacing.
    RECEIPT_TIMEOUT_S is shortened too: before the fix, the client gave up after it with
    'the node is not mining', the error the agent counted towards --offline-s."""
    from offchain.chain import connect
    monkeypatch.setattr(client, "RECEIPT_TIMEOUT_S", 10)
    with connect("anvil", artifacts) as chain:
        chain.replace_after_s = 1.0
        yield chain


def _rpc(chain, method, *params):
    out = chain.w3.provider.make_request(method, list(params))
    assert "error" not in out, out
    return out.get("result")


def _pool(chain) -> dict:
    """hash -> transaction, of what waits in the node's pool."""
    content = _rpc(chain, "txpool_content")
    return {tx["hash"]: tx for part in ("pending", "queued") for by_nonce in content[part].values()
            for tx in by_nonce.values()}


def _until(cond, timeout=15.0, what="the condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = cond()
        if got:
            return got
        time.sleep(0.05)
    pytest.fail(f"timed out waiting for {what}")


def _in_thread(fn):
    out = {}

    def run():
        try:
            out["result"] = fn()
        except BaseException as e:  # noqa: BLE001 - reported by the test
            out["error"] = e
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, out


def _result(t, out, timeout=40):
    t.join(timeout)
    assert not t.is_alive(), "the send did not return"
    if "error" in out:
        raise out["error"]
    return out["result"]


def _pay(chain, sender, to, value):
    return chain._send("pay", {"to": to, "value": value}, sender)


def _passed_over(chain, send, base_fee: int, mining: bool = True):
    """Start `send` with mining off; once it waits in the pool (-> that pool), a block at
    `base_fee` passes it over (Anvil then drops it from its pool); then, if `mining`, a block
    a second. -> (thread, its result box, the pool as first seen)."""
    _rpc(chain, "evm_setAutomine", False)
    t, out = _in_thread(send)
    pool = _until(lambda: _pool(chain), what="the first send")
    _rpc(chain, "anvil_setNextBlockBaseFeePerGas", hex(base_fee))
    _rpc(chain, "evm_mine")
    if mining:
        _rpc(chain, "evm_setIntervalMining", 1)
    return t, out, pool


@pytest.mark.anvil
def test_a_transaction_passed_over_by_a_base_fee_spike_is_replaced_at_its_nonce(node):
    chain, sender, to = node, node.accounts[1], node.accounts[2].address
    n0 = chain.w3.eth.get_transaction_count(sender.address)
    before = chain.w3.eth.get_balance(to)
    # a base fee of six full blocks' worth and more
    t, out, first = _passed_over(chain, lambda: _pay(chain, sender, to, 12345), 300 * G)
    (h1, tx1), = first.items()
    fee1, tip1 = int(tx1["maxFeePerGas"], 16), int(tx1["maxPriorityFeePerGas"], 16)
    receipt = _result(t, out)
    sent = chain.w3.eth.get_transaction(receipt["transactionHash"])
    assert receipt["status"] == 1 and sent["nonce"] == n0  # mined, at the nonce of the first send
    assert receipt["transactionHash"].to_0x_hex() != h1  # by its replacement,
    assert sent["maxFeePerGas"] >= fee1 * 11 // 10 and sent["maxFeePerGas"] > 300 * G  # at today's price
    assert sent["maxPriorityFeePerGas"] > tip1 and sent["maxPriorityFeePerGas"] >= tip1 * 11 // 10
    assert sent["maxFeePerGas"] <= chain.max_fee_wei
    assert chain.w3.eth.get_balance(to) == before + 12345  # once
    again = _pay(chain, sender, to, 1)  # the next call takes the next nonce
    assert chain.w3.eth.get_transaction(again["transactionHash"])["nonce"] == n0 + 1
    assert chain.w3.eth.get_transaction_count(sender.address) == n0 + 2


@pytest.mark.anvil
def test_an_original_mined_meanwhile_is_recognised_and_not_sent_again(node, monkeypatch):
    chain, sender, to = node, node.accounts[3], node.accounts[4].address
    n0 = chain.w3.eth.get_transaction_count(sender.address)
    before = chain.w3.eth.get_balance(to)
    send = chain.w3.eth.send_raw_transaction
    raws = []

    def racing_send(raw):
        """The replacement finds the original mined (it was still in another node's pool)."""
        raws.append(bytes(raw))
        if len(raws) == 2:
            _rpc(chain, "anvil_setNextBlockBaseFeePerGas", hex(1 * G))
            send(raws[0])
            _rpc(chain, "evm_mine")
        return send(raw)
    monkeypatch.setattr(chain.w3.eth, "send_raw_transaction", racing_send)
    t, out, first = _passed_over(chain, lambda: _pay(chain, sender, to, 777), 300 * G, mining=False)
    (h1, _), = first.items()
    receipt = _result(t, out)
    assert len(raws) == 2  # it tried to replace, and sent nothing after "nonce too low"
    assert receipt["status"] == 1 and receipt["transactionHash"].to_0x_hex() == h1  # the original's receipt
    assert chain.w3.eth.get_transaction_count(sender.address) == n0 + 1
    assert chain.w3.eth.get_balance(to) == before + 777  # paid once
    monkeypatch.setattr(chain.w3.eth, "send_raw_transaction", send)
    _rpc(chain, "evm_setAutomine", True)
    again = _pay(chain, sender, to, 1)
    assert chain.w3.eth.get_transaction(again["transactionHash"])["nonce"] == n0 + 1


@pytest.mark.anvil
def test_after_a_restart_the_next_action_replaces_a_waiting_transaction_not_queues_behind_it(node):
    """A restarted agent knows nothing of what its last run left in the pool: it sends at the
    key's mined count, and a refusal as underpriced makes it bump, not take the next nonce."""
    chain, sender, to = node, node.accounts[5], node.accounts[6].address
    n0 = chain.w3.eth.get_transaction_count(sender.address)
    _rpc(chain, "evm_setAutomine", False)
    stuck = sender.sign_transaction({"to": to, "value": 5, "gas": 21_000, "nonce": n0, "chainId": chain.chain_id,
                                     "maxFeePerGas": client.LOCAL_MAX_FEE, "maxPriorityFeePerGas": 0})
    h_stuck = chain.w3.eth.send_raw_transaction(stuck.raw_transaction).to_0x_hex()
    restarted = Chain(chain.w3, chain.accounts, "anvil", chain.artifacts, local=True)
    restarted.replace_after_s = 1.0
    t, out = _in_thread(lambda: _pay(restarted, sender, to, 9))
    _until(lambda: set(_pool(chain)) - {h_stuck}, what="the restarted agent's send")
    _rpc(chain, "evm_mine")
    receipt = _result(t, out)
    assert chain.w3.eth.get_transaction(receipt["transactionHash"])["nonce"] == n0
    assert chain.w3.eth.get_transaction_count(sender.address) == n0 + 1  # the stuck one is gone
    assert h_stuck not in _pool(chain)


@pytest.mark.anvil
def test_a_transaction_the_node_lost_is_sent_again(node):
    """A node that lost its pool (restarted) and mines only on a new transaction mines no
    block: the same signed bytes are sent again."""
    chain, sender, to = node, node.accounts[9], node.accounts[2].address
    n0 = chain.w3.eth.get_transaction_count(sender.address)
    _rpc(chain, "evm_setAutomine", False)
    t, out = _in_thread(lambda: _pay(chain, sender, to, 3))
    (h1, _), = _until(lambda: _pool(chain), what="the first send").items()
    _rpc(chain, "anvil_dropAllTransactions")
    _rpc(chain, "evm_setAutomine", True)
    receipt = _result(t, out)
    assert receipt["transactionHash"].to_0x_hex() == h1
    assert chain.w3.eth.get_transaction(receipt["transactionHash"])["nonce"] == n0


@pytest.mark.anvil
def test_at_the_ceiling_it_says_what_to_raise_and_is_not_a_lost_node(node):
    from offchain.chain.errors import ChainUnavailable
    chain, sender, to = node, node.accounts[7], node.accounts[8].address
    chain.max_fee_wei = 60 * G
    t, out, _ = _passed_over(chain, lambda: _pay(chain, sender, to, 1), 300 * G)
    with pytest.raises(FeeCeilingReached, match="VERDE_MAX_FEE_GWEI") as e:
        _result(t, out)
    assert not isinstance(e.value, ChainUnavailable) and "--max-fee-gwei" in str(e.value)


@pytest.mark.anvil
def test_a_new_action_at_a_waiting_nonce_says_so_when_the_earlier_one_is_mined_instead(node, monkeypatch):
    """An action left waiting (its send stopped at the fee ceiling) holds the key's nonce; the
    next, different action replaces it there. If the waiting one is mined first after all, the
    new one was not done: the caller is told so (EarlierTransactionMined, which a tick retries),
    never handed the earlier one's receipt as its own, and the next call takes the next nonce."""
    from offchain.chain.client import EarlierTransactionMined
    chain, sender, first_to, second_to = node, node.accounts[1], node.accounts[3].address, node.accounts[4].address
    n0 = chain.w3.eth.get_transaction_count(sender.address)
    paid = [chain.w3.eth.get_balance(a) for a in (first_to, second_to)]
    chain.max_fee_wei = 60 * G
    t, out, first = _passed_over(chain, lambda: _pay(chain, sender, first_to, 111), 300 * G)  # no bump: the ceiling
    (h1, _), = first.items()
    with pytest.raises(FeeCeilingReached):
        _result(t, out)
    assert chain._pending[sender.address].nonce == n0  # it still holds its nonce
    _rpc(chain, "evm_setIntervalMining", 0)
    _rpc(chain, "evm_setAutomine", False)
    chain.max_fee_wei = 1000 * G
    send, raws = chain.w3.eth.send_raw_transaction, []
    first_raw = chain._pending[sender.address].raw

    def racing_send(raw):
        """The first action, still in another node's pool, is mined just before the second's send."""
        raws.append(bytes(raw))
        _rpc(chain, "anvil_setNextBlockBaseFeePerGas", hex(1 * G))
        send(first_raw)
        _rpc(chain, "evm_mine")
        return send(raw)
    monkeypatch.setattr(chain.w3.eth, "send_raw_transaction", racing_send)
    with pytest.raises(EarlierTransactionMined, match="pay was not sent"):
        _pay(chain, sender, second_to, 222)
    monkeypatch.setattr(chain.w3.eth, "send_raw_transaction", send)
    assert len(raws) == 1
    mined = chain.w3.eth.get_transaction_receipt(h1)
    assert mined["status"] == 1 and chain.w3.eth.get_transaction(h1)["nonce"] == n0
    assert chain.w3.eth.get_balance(first_to) == paid[0] + 111  # the first paid once
    assert chain.w3.eth.get_balance(second_to) == paid[1]  # the second not at all
    assert sender.address not in chain._pending
    assert chain.gas_log[-1] == ("pay", mined["gasUsed"])  # what the earlier one cost is in the books
    assert len(chain.gas_log) == len(chain.calldata_log) and chain.calldata_log[-1] == 0  # a transfer: no calldata
    _rpc(chain, "evm_setAutomine", True)
    again = _pay(chain, sender, second_to, 222)  # the retry: done, at the next nonce
    assert chain.w3.eth.get_transaction(again["transactionHash"])["nonce"] == n0 + 1
    assert chain.w3.eth.get_balance(second_to) == paid[1] + 222


@pytest.mark.anvil
def test_a_key_that_cannot_cover_the_ceiling_bids_all_it_has_and_then_says_fund_it(node):
    """A spike asks for more per gas than the key's balance covers for the transaction's gas
    limit: the replacement bids what the balance covers (a node refuses a bid the sender
    cannot pay in full: every bump to today's price was refused as 'insufficient funds', and
    the waiting transaction was never raised); when even that is under the base fee, the error
    names the balance and says to fund the key, not to raise the ceiling."""
    from eth_account import Account
    chain, funder = node, node.accounts[2]
    poor = Account.create()
    afford, value = 100 * G, 1  # wei per gas its balance covers for a plain transfer's 21,000 gas
    _pay(chain, funder, poor.address, 21_000 * afford + value)
    send = lambda: chain._send("pay", {"to": funder.address, "value": value, "gas": 21_000}, poor)  # noqa: E731
    t, out, _ = _passed_over(chain, send, 60 * G)  # sent at the local 50 gwei; today's price: 2 x 60 + tip > 100
    receipt = _result(t, out)
    sent = chain.w3.eth.get_transaction(receipt["transactionHash"])
    assert receipt["status"] == 1 and sent["maxFeePerGas"] == afford  # all it had, and mined
    # now it cannot cover even the base fee: the error says why and what to do
    _rpc(chain, "evm_setIntervalMining", 0)
    _rpc(chain, "evm_setAutomine", True)
    poor = Account.create()
    _pay(chain, funder, poor.address, 21_000 * 52 * G + value)  # the first send (50 gwei) and no +10% bump
    t, out, _ = _passed_over(chain, send, 300 * G)
    with pytest.raises(FeeCeilingReached, match="fund this key") as e:
        _result(t, out)
    assert "52 gwei per gas" in str(e.value) and poor.address in str(e.value) and "VERDE_MAX_FEE_GWEI" not in str(e.value)


def test_an_agent_does_not_call_a_node_that_answers_gone():
    """NodeGone only when the node itself does not answer: failures of a tick that a node
    answering reads comes with are retried past --offline-s."""
    from types import SimpleNamespace

    from offchain.agent.trainer_agent import NodeGone, TrainerAgent
    from offchain.chain.errors import ChainUnavailable

    class Eth:
        answers = True

        @property
        def block_number(self):
            if not self.answers:
                raise ConnectionError("refused")
            return 7

    eth = Eth()
    agent = TrainerAgent.__new__(TrainerAgent)
    agent.name, agent.jid = "a", 1
    agent.v = SimpleNamespace(chain=SimpleNamespace(w3=SimpleNamespace(eth=eth)))
    agent._check_deployment = lambda: None
    ticks = []

    def tick():
        ticks.append(1)
        if len(ticks) < 4:
            raise ChainUnavailable("a move was not mined in time")
        return True
    agent.tick = tick
    agent.run(poll_s=0.001, offline_s=0)  # every failure is past --offline-s: the node answers, so it carries on
    assert len(ticks) == 4
    ticks.clear()
    eth.answers = False
    with pytest.raises(NodeGone):
        agent.run(poll_s=0.001, offline_s=0)
