import os
import signal
import socket
import subprocess
import sys
import textwrap
import time

import pytest

from offchain.chain import (AnvilProcess, ChainError, ChainUnavailable, KeyLoadError, TransactionReverted,
                            connect, load_key)
from offchain.chain.anvil import rpc


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie still answers kill(0); treat it as gone
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split()[2] != "Z"


def test_deploy_and_call(chain):
    h = chain.deploy("Float32Harness")
    one, two, three = 0x3F800000, 0x40000000, 0x40400000
    assert chain.call(h.functions.exec(0, one, two, 0)) == three
    receipt = chain.transact(h.functions.exec(2, two, two, 0))  # a real transaction too
    assert receipt["status"] == 1 and receipt["gasUsed"] > 21000


def test_custom_error_decodes_the_same_on_every_backend(chain):
    h = chain.deploy("Float32Harness")
    with pytest.raises(TransactionReverted) as e:
        chain.call(h.functions.exec(99, 0, 0, 0))
    assert e.value.error == "UnknownPrimitive" and e.value.args_ == (99,)
    with pytest.raises(TransactionReverted) as e:
        chain.transact(h.functions.exec(0, 1 << 32, 0, 0))
    assert e.value.error == "NotBinary32" and e.value.args_ == (1 << 32,)


def test_accounts_are_funded_and_identical_across_backends(chain):
    addrs = [a.address for a in chain.accounts]
    assert addrs[0] == "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"
    assert all(chain.w3.eth.get_balance(a) >= 10**21 for a in addrs)


def test_unknown_backend_is_a_clear_error():
    with pytest.raises(ChainError, match="unknown chain backend 'ganache'"):
        connect("ganache")


@pytest.mark.anvil
def test_anvil_stops_on_close_and_leaves_no_process(artifacts):
    chain = connect("anvil", artifacts)
    pid = chain._closer.proc.pid
    assert _alive(pid)
    chain.close()
    assert not _alive(pid)


@pytest.mark.anvil
def test_anvil_on_a_port_in_use_is_a_clear_error():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(ChainUnavailable, match=f"port {port} .* already in use"):
            AnvilProcess(port=port)


@pytest.mark.anvil
def test_anvil_dying_under_a_client_is_reported(artifacts):
    chain = connect("anvil", artifacts)
    try:
        os.killpg(chain._closer.proc.pid, signal.SIGKILL)
        chain._closer.proc.wait(timeout=5)
        with pytest.raises(ChainUnavailable, match="Anvil .* exited"):
            chain.deploy("Float32Harness")
    finally:
        chain.close()


@pytest.mark.anvil
def test_anvil_dies_with_its_parent_even_on_sigkill(tmp_path):
    code = textwrap.dedent("""
        import sys, time
        from offchain.chain import AnvilProcess
        a = AnvilProcess().start()
        print(a.proc.pid, a.url, flush=True)
        time.sleep(60)
    """)
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    pid, url = parent.stdout.readline().split()
    assert rpc(url, "eth_chainId") == hex(31337)
    parent.kill()
    parent.wait()
    deadline = time.time() + 10
    while _alive(int(pid)) and time.time() < deadline:
        time.sleep(0.1)
    assert not _alive(int(pid)), "anvil outlived its SIGKILLed parent"


@pytest.mark.anvil
def test_anvil_writes_no_past_state_to_disk(tmp_path, monkeypatch):
    """Past ~500 blocks Anvil wrote each state to ~/.foundry/anvil/tmp and left it there when
    stopped by a signal: 20 hours of test runs filled the disk (74 GB) and failed the next CI run."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    with AnvilProcess() as node:
        account = rpc(node.url, "eth_accounts")[0]
        rpc(node.url, "anvil_mine", [hex(1200)], timeout=60)
        time.sleep(1)  # Anvil moves states out of memory as it mines
        assert rpc(node.url, "eth_getBalance", [account, hex(1100)]) != "0x0"  # recent history answers
        written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert not written, f"Anvil wrote {written[:3]}"


def test_rpc_unreachable_url_is_a_clear_error(monkeypatch, artifacts):
    monkeypatch.setenv("VERDE_PRIVATE_KEY", "0x" + "11" * 32)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens here
    t = time.time()
    with pytest.raises(ChainUnavailable, match=f"cannot reach an Ethereum node at http://127.0.0.1:{port}"):
        connect(f"rpc:http://127.0.0.1:{port}", artifacts)
    assert time.time() - t < 15


def test_rpc_bad_url_scheme():
    with pytest.raises(ChainError, match="not an http"):
        connect("rpc:ws//nope")


@pytest.mark.parametrize("key", ["0x1234", "zz" * 32, "0x" + "00" * 32])
def test_wrong_private_key_is_a_clear_error(monkeypatch, key):
    monkeypatch.setenv("VERDE_PRIVATE_KEY", key)
    with pytest.raises(KeyLoadError, match="VERDE_PRIVATE_KEY is not a valid"):
        load_key()


def test_missing_key_says_which_variables(monkeypatch):
    for v in ("VERDE_PRIVATE_KEY", "VERDE_KEYSTORE"):
        monkeypatch.delenv(v, raising=False)
    with pytest.raises(KeyLoadError, match="VERDE_KEYSTORE_PASSWORD"):
        load_key()


def test_keystore_wrong_password(monkeypatch, tmp_path):
    import json
    from eth_account import Account
    ks = Account.encrypt("0x" + "22" * 32, "right", iterations=2)
    (tmp_path / "k.json").write_text(json.dumps(ks))
    monkeypatch.delenv("VERDE_PRIVATE_KEY", raising=False)
    monkeypatch.setenv("VERDE_KEYSTORE", str(tmp_path / "k.json"))
    monkeypatch.setenv("VERDE_KEYSTORE_PASSWORD", "wrong")
    with pytest.raises(KeyLoadError, match="wrong password"):
        load_key()
    monkeypatch.setenv("VERDE_KEYSTORE_PASSWORD", "right")
    assert load_key().key.hex().endswith("22" * 32)


@pytest.mark.anvil
def test_rpc_backend_against_a_running_node(monkeypatch, artifacts):
    with AnvilProcess() as node:
        monkeypatch.setenv("VERDE_PRIVATE_KEY", "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80")
        chain = connect(f"rpc:{node.url}", artifacts)
        h = chain.deploy("Float32Harness")
        assert chain.call(h.functions.exec(5, 0x40800000, 0, 0)) == 0x40000000  # sqrt(4) = 2
