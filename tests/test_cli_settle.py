"""Every payment recoverable from the command line, and the commands that follow a job, as
separate processes on Anvil (issue #41): `verde settle` (anyone) refunds a job nobody joined,
`verde status` names the command each waiting job needs, `verde watch` prints ETH and UTC and
waits out a node restart, `verde key fund` funds a new key on a local chain, `verde node`
prints every funded account, and the local profile is said where it applies."""
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from offchain.chain import AnvilProcess
from offchain.chain.anvil import rpc, free_port

sys.path.insert(0, str(Path(__file__).resolve().parent / "protocol"))
from small_job import write_small_job  # noqa: E402

VERDE = Path(sys.executable).parent / "verde"
KEY = "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80"  # Anvil's first test account (client)
OTHER = "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d"  # its second: anyone else

pytestmark = [pytest.mark.anvil, pytest.mark.xdist_group("cli-settle")]


def env(key=KEY, **extra):
    e = {"PATH": "/usr/bin:/bin", "COLUMNS": "200", **({"VERDE_PRIVATE_KEY": key} if key else {}), **extra}
    if os.environ.get("PYTHONPATH"):  # a worktree's copy, not the installed one
        e["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return e


def verde(*args, key=KEY):
    r = subprocess.run([str(VERDE), *args], capture_output=True, text=True, timeout=300, env=env(key))
    return r.returncode, r.stdout + r.stderr


def advance(url, seconds):
    rpc(url, "evm_increaseTime", [seconds])
    rpc(url, "evm_mine")


def test_settle_refunds_a_job_nobody_joined_and_status_names_each_command(tmp_path):
    with AnvilProcess() as node:
        on = ("--chain", f"rpc:{node.url}", "--deployment", str(tmp_path / "d.json"))
        rc, out = verde("deploy", "--chain", f"rpc:{node.url}", "--out", str(tmp_path / "d.json"))
        assert rc == 0 and "local profile (chain id 31337" in out and "floors clock 60 s" in out, out
        rc, out = verde("post", str(write_small_job(tmp_path / "job")), *on, "--payment", "1.5", "--stake", "0.25")
        assert rc == 0 and "local profile" in out and "join 60 s, train 40 s, reveal 20 s" in out, out
        rc, out = verde("status", "1", *on)
        assert rc == 0 and "defaults: local profile" in out and "next: trainers join until" in out, out
        rc, out = verde("settle", "1", *on, key=OTHER)
        assert rc == 2 and "cannot be moved on yet (joining)" in out and "Fix: wait" in out, out
        advance(node.url, 200)
        rc, out = verde("status", "1", *on)
        assert "now: waiting for settlement" in out, out
        assert "next: `verde settle 1` (anyone): nobody joined: settling refunds the client's payment" in out, out
        rc, out = verde("settle", "1", *on, key=OTHER)  # anyone may
        assert rc == 0 and "job 1: settled" in out and "next: `verde withdraw` (the client)" in out, out
        rc, out = verde("settle", "1", *on)
        assert rc == 0 and "settled" in out, out  # nothing left to do is not an error
        rc, out = verde("withdraw", *on)
        assert rc == 0 and "withdrew 1.5 ETH" in out, out
        rc, out = verde("status", "1", *on)
        assert "next: settled; nothing is owed" in out, out
        rc, out = verde("watch", "1", *on)
        assert rc == 0 and "payment 1.5 ETH, stake 0.25 ETH" in out and "no result; the payment" in out, out
        assert not re.search(r"\d{15,}", out), "wei, not ETH: " + out
        rc, out = verde("report", "1", *on, "--out", str(tmp_path / "r.png"), key=None)  # any job, from the chain
        assert rc == 0 and "no result accepted" in out and (tmp_path / "r.png").stat().st_size > 5_000, out


def test_watch_waits_out_a_node_restart_and_prints_utc(tmp_path):
    with AnvilProcess(extra_args=("--state", str(tmp_path / "state.json"))) as node:
        on = ("--chain", f"rpc:{node.url}", "--deployment", str(tmp_path / "d.json"))
        assert verde("deploy", "--chain", f"rpc:{node.url}", "--out", str(tmp_path / "d.json"))[0] == 0
        assert verde("post", str(write_small_job(tmp_path / "job")), *on, "--payment", "1", "--stake", "1")[0] == 0
        log = tmp_path / "watch.log"
        with open(log, "w") as f:
            watch = subprocess.Popen([str(VERDE), "watch", "1", *on, "--poll-s", "0.2"], env=env(None), stdout=f,
                                     stderr=subprocess.STDOUT)
            try:
                t = time.time()
                while "job 1 posted" not in log.read_text() and time.time() - t < 60:
                    time.sleep(0.2)
                node.stop(keep_port=True)
                t = time.time()
                while "lost the node" not in log.read_text() and time.time() - t < 60:
                    time.sleep(0.2)
                assert watch.poll() is None, "watch died with the node: " + log.read_text()
                node.start()
                advance(node.url, 200)
                rc, out = verde("settle", "1", *on)
                assert rc == 0, out
                assert watch.wait(timeout=60) == 0, log.read_text()
            finally:
                if watch.poll() is None:
                    watch.kill()
                    watch.wait()
        said = log.read_text()
        assert "lost the node" in said and "the node is back" in said and "job 1 settled" in said, said
        assert "HTTPConnectionPool" not in said and "Traceback" not in said, said


def test_key_fund_gives_a_new_key_eth_on_a_local_chain_and_node_lists_every_account(tmp_path):
    from offchain.chain.backends import N_ACCOUNTS, _mnemonic_accounts
    from offchain.cli.profiles import LOCAL, PUBLIC, profile_of
    with AnvilProcess() as node:
        addr = "0x" + "ab" * 20
        rc, out = verde("key", "fund", addr, "--eth", "2.5", "--chain", f"rpc:{node.url}", key=None)
        assert rc == 0 and "sent 2.5 ETH" in out, out
        assert int(rpc(node.url, "eth_getBalance", [addr, "latest"]), 16) == 25 * 10**17
    assert profile_of(SimpleNamespace(local=False, chain_id=1)) is PUBLIC  # a public chain keeps today's defaults
    assert profile_of(SimpleNamespace(local=False, chain_id=31337)) is LOCAL
    assert PUBLIC.floors.clock_s == 600 and PUBLIC.join_s == 600 and PUBLIC.policy.min_clock_s == 1800
    for p in (LOCAL, PUBLIC):  # an idle agent's reads: far inside the shortest window its policy stakes on
        shortest = min(p.policy.min_answer_window_s, p.policy.min_reveal_window_s, p.policy.min_clock_s)
        assert 0 < p.poll_s <= shortest / 20, (p.name, p.poll_s, shortest)
    port = free_port()
    p = subprocess.Popen([str(VERDE), "node", "--port", str(port)], env=env(None), stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    try:
        lines = []
        t = time.time()
        while len([x for x in lines if re.match(r"\s+\(\d+\) 0x", x)]) < N_ACCOUNTS and time.time() - t < 60:
            lines.append(p.stdout.readline())
    finally:
        p.terminate()
        p.wait(timeout=30)
    said = "".join(lines)
    for a in _mnemonic_accounts(N_ACCOUNTS):
        assert a.address in said, said
    assert "verde key fund" in said, said


def test_an_agent_stopped_with_a_committed_stake_says_its_reveal_deadline(tmp_path):
    """SIGTERM used to print only "interrupted"."""
    import signal
    with AnvilProcess() as node:
        on = ("--chain", f"rpc:{node.url}", "--deployment", str(tmp_path / "d.json"))
        assert verde("deploy", "--chain", f"rpc:{node.url}", "--out", str(tmp_path / "d.json"))[0] == 0
        job = write_small_job(tmp_path / "job")
        assert verde("post", str(job), *on, "--payment", "1", "--stake", "0.5")[0] == 0
        log = tmp_path / "agent.log"
        with open(log, "w") as f:
            agent = subprocess.Popen([str(VERDE), "agent", str(job), "1", *on, "--workdir", str(tmp_path / "a")],
                                     env=env(OTHER), stdout=f, stderr=subprocess.STDOUT)
            try:
                t = time.time()
                while "commit (sealed result)" not in log.read_text():
                    assert time.time() - t < 90 and agent.poll() is None, log.read_text()
                    time.sleep(0.3)
                time.sleep(1)
                agent.send_signal(signal.SIGTERM)
                assert agent.wait(timeout=30) == 130
            finally:
                if agent.poll() is None:
                    agent.kill()
                    agent.wait()
        said = log.read_text()
    assert "STOPPED WITH A STAKE AT RISK: its stake of 0.5 ETH in job 1 is committed and not revealed" in said, said
    assert "before the reveal deadline" in said and "UTC (in " in said and "interrupted" in said, said
