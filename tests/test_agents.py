"""Trainer agents as separate processes on an Anvil node (`verde agent`): an honest one and
a cheater join, train, commit, reveal and settle; the dispute is played on chain by the
agents alone. The faults: the honest agent killed with SIGKILL during training and again
mid-dispute, the node restarted under running agents, a key that cannot pay the stake.
Each time the honest agent still wins and withdraws its payment and both stakes."""
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from web3 import Web3

from offchain.chain import AnvilProcess, Chain
from offchain.chain.backends import _mnemonic_accounts
from offchain.chain.verde import PHASE_DONE, Verde
from offchain.dispute.context import Context
from offchain.protocol.jobfile import load

sys.path.insert(0, str(Path(__file__).resolve().parent / "protocol"))
from small_job import FANOUT, mlp_data, write_division_fault_job, write_small_job  # noqa: E402

from offchain.protocol.dataset import write_job  # noqa: E402

VERDE = Path(sys.executable).parent / "verde"
pytestmark = pytest.mark.anvil
PAY, STAKE = 2 * 10**18, 10**18


class _Agents:
    """`verde agent` processes on one node and job. Each start writes its own log; every
    process is killed and every log closed when the test ends, whatever happened."""

    def __init__(self, node, dep, job_file, tmp_path):
        self.node, self.dep, self.job_file, self.tmp = node, dep, job_file, tmp_path
        self.procs, self.files = [], []

    def start(self, account, name, behaviour="honest", *extra) -> tuple[subprocess.Popen, Path]:
        """-> (the process, its log). The workdir is per name: a restart resumes from it."""
        log = self.tmp / f"{name}-{len(self.files)}.log"
        self.files.append(open(log, "w"))
        env = {"PATH": "/usr/bin:/bin", "VERDE_PRIVATE_KEY": account.key.hex()}
        self.procs.append(subprocess.Popen(
            [str(VERDE), "agent", str(self.job_file), "1", "--chain", f"rpc:{self.node.url}", "--deployment",
             str(self.dep), "--workdir", str(self.tmp / name), "--behaviour", behaviour, "--name", name,
             "--poll-s", "0.2", *extra], env=env, stdout=self.files[-1], stderr=subprocess.STDOUT))
        return self.procs[-1], log

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        for f in self.files:
            f.close()


def _until(cond, what, timeout=240, poll=0.3):
    t = time.time()
    while not cond():
        if time.time() - t > timeout:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(poll)


def _setup(node, tmp_path, artifacts, steps=None):
    chain = Chain(Web3(Web3.HTTPProvider(node.url)), _mnemonic_accounts(), "anvil", artifacts)
    if steps is None:
        job_file = write_small_job(tmp_path / "job")
    else:  # long enough that a kill lands in the middle of training
        job_file = write_job(tmp_path / "job", "mlp", {"d_in": 16, "d_hidden": 32, "n_classes": 10}, mlp_data(),
                             steps=steps, batch_size=8, fanout=FANOUT, chunk=64)
    job = load(job_file)
    v = Verde.deploy(chain)
    dep = tmp_path / "deployment.json"
    dep.write_text(json.dumps(v.addresses()))
    v.post(job, Context(job), PAY, STAKE, max_trainers=2, client=chain.accounts[1])
    return chain, v, job_file, dep


def _deadlines(chain, v, accounts):
    """Move the clock past the commit and then the reveal deadline once both have acted."""
    seat = lambda a: chain.call(v.registry.functions.seats(1, a.address))  # noqa: E731
    _until(lambda: all(seat(a)[2] != bytes(32) for a in accounts), "both commitments")
    chain.advance(1300)
    _until(lambda: all(seat(a)[3] != bytes(32) for a in accounts), "both reveals")
    chain.advance(600)  # an agent settles, the registry asks for a match
    _until(lambda: v.game.events.MatchOpened().get_logs(from_block=0), "the match", poll=0.02)
    return v.game.events.MatchOpened().get_logs(from_block=0)[0]["args"]["id"]


def _honest_won(chain, v, m, honest_acct, before, proc, log):
    assert proc.wait(timeout=300) == 0, log.read_text()[-3000:]
    assert v.status(1)[2] == 3  # settled
    decided = v.decision(m)
    assert decided["winner"] == honest_acct.address and decided["level"] == 5
    assert v.owed(honest_acct.address) == 0  # withdrawn
    assert chain.w3.eth.get_balance(honest_acct.address) - before > PAY + STAKE  # payment + both stakes - gas


def test_honest_agent_killed_during_training_and_mid_dispute_still_wins(tmp_path, artifacts):
    with AnvilProcess() as node:
        chain, v, job_file, dep = _setup(node, tmp_path, artifacts, steps=40)
        honest_acct, bad_acct = chain.accounts[2], chain.accounts[3]
        with _Agents(node, dep, job_file, tmp_path) as agents:
            honest, _ = agents.start(honest_acct, "honest")
            agents.start(bad_acct, "cheater", "corrupt-value:step=3,node=9")
            ckpts = tmp_path / "honest" / "trainer"
            _until(lambda: any(ckpts.glob("ckpt-*")) if ckpts.exists() else False, "the first checkpoint", poll=0.01)
            honest.send_signal(signal.SIGSTOP)  # frozen where it is, then killed there
            seat = chain.call(v.registry.functions.seats(1, honest_acct.address))
            assert seat[0] and seat[2] == bytes(32), "joined, not yet committed: the kill is during training"
            honest.send_signal(signal.SIGKILL)
            honest.wait()
            honest, restarted = agents.start(honest_acct, "honest")
            m = _deadlines(chain, v, (honest_acct, bad_acct))
            honest.send_signal(signal.SIGKILL)  # mid-dispute
            honest.wait()
            assert v.match_state(m)["phase"] != PHASE_DONE, "the dispute ended before the kill: nothing was tested"
            honest, last = agents.start(honest_acct, "honest")
            before = chain.w3.eth.get_balance(honest_acct.address)
            _honest_won(chain, v, m, honest_acct, before, honest, last)
            text = restarted.read_text()
            assert "training" in text and not text.count("join (stake)"), "resumed, did not join twice"

        # what a client sees afterwards: `verde status` and `verde watch`
        env = {"PATH": "/usr/bin:/bin", "COLUMNS": "250", "VERDE_PRIVATE_KEY": chain.accounts[1].key.hex()}
        args = ["--chain", f"rpc:{node.url}", "--deployment", str(dep)]
        out = subprocess.run([str(VERDE), "status", "1", *args], capture_output=True, text=True, env=env).stdout
        assert "job 1: settled" in out and f"match {m}: decided at level 5, {honest_acct.address} won" in out, out
        out = subprocess.run([str(VERDE), "watch", "1", *args], capture_output=True, text=True, env=env,
                             timeout=60).stdout
        for what in ("job 1 posted by", "payment 2.0 ETH", "commits its sealed result", "StepFound", "NodeFound",
                     "KernelFound", "ElementFound", f"match {m} decided at level 5", "job 1 settled: result"):
            assert what in out, (what, out)


def test_a_faulting_job_pays_the_honest_agents_for_the_steps_done(tmp_path, artifacts):
    """Issue #42: step 3 of 6 cannot be computed (a division by zero in forward, from a row of
    the data). Both honest agents end their run with the fault claim and reveal it, a cheater
    that trains through the fault reveals a result; it loses its match at level 5 on chain, and
    each honest agent withdraws its stake and half of the cheater's stake and of the pay for
    the 3 steps done; the client gets back the pay for the 3 steps not done."""
    with AnvilProcess() as node:
        chain = Chain(Web3(Web3.HTTPProvider(node.url)), _mnemonic_accounts(), "anvil", artifacts)
        job_file = write_division_fault_job(tmp_path / "job")
        job = load(job_file)
        v = Verde.deploy(chain)
        dep = tmp_path / "deployment.json"
        dep.write_text(json.dumps(v.addresses()))
        client, honest, bad = chain.accounts[1], chain.accounts[2:4], chain.accounts[4]
        v.post(job, Context(job), PAY, STAKE, max_trainers=3, client=client)
        before = [chain.w3.eth.get_balance(a.address) for a in honest]
        with _Agents(node, dep, job_file, tmp_path) as agents:
            procs = [agents.start(a, f"honest-{i}") for i, a in enumerate(honest)]
            agents.start(bad, "cheater", "fault-ignorer")
            m = _deadlines(chain, v, (*honest, bad))
            for p, log in procs:
                assert p.wait(timeout=300) == 0, log.read_text()[-3000:]
            text = procs[0][1].read_text()
        assert "step 3 faults" in text and "fault claim was accepted" in text, text[-3000:]
        decided = v.decision(m)
        assert decided["loser"] == bad.address and decided["winner"] in {a.address for a in honest}
        assert decided["level"] == 5
        (ev,) = v.registry.events.FaultAccepted().get_logs(from_block=0)
        assert (ev["args"]["step"], ev["args"]["paid"], ev["args"]["refunded"]) == (3, PAY // 2, PAY // 2)
        for a, b in zip(honest, before):  # withdrawn: its stake, half the cheater's, half the pay for 3 of 6 steps
            assert v.owed(a.address) == 0
            assert chain.w3.eth.get_balance(a.address) - b > (STAKE + PAY // 2) // 2 - 10**16  # (less gas)
        assert v.owed(client.address) == PAY // 2 and v.owed(bad.address) == 0
        # what the client is told: `verde status` names the fault and the pay; `verde fetch` has no model
        env = {"PATH": "/usr/bin:/bin", "COLUMNS": "250", "VERDE_PRIVATE_KEY": client.key.hex()}
        args = ["--chain", f"rpc:{node.url}", "--deployment", str(dep)]
        out = " ".join(subprocess.run([str(VERDE), "status", "1", *args], capture_output=True, text=True,
                                      env=env).stdout.split())
        assert "a FAULT at step 3" in out and "paid 1.0 ETH for the 3 steps before it" in out, out
        r = subprocess.run([str(VERDE), "fetch", "1", str(job_file), "--from", str(tmp_path / "honest-0" / "published"),
                            "--out", str(tmp_path / "model.safetensors"), *args], capture_output=True, text=True, env=env)
        said = " ".join((r.stdout + r.stderr).split())
        assert r.returncode == 2 and "accepted result is a fault" in said and "no model" in said, said
        assert not (tmp_path / "model.safetensors").exists()


def test_agents_reconnect_after_the_node_restarts(tmp_path, artifacts):
    """Anvil is stopped mid-dispute and started again from its saved state (--state): both
    agents see the node go, wait for it, and carry on; nothing is lost."""
    with AnvilProcess(extra_args=("--state", str(tmp_path / "anvil-state.json"))) as node:
        chain, v, job_file, dep = _setup(node, tmp_path, artifacts)
        honest_acct, bad_acct = chain.accounts[2], chain.accounts[3]
        with _Agents(node, dep, job_file, tmp_path) as agents:
            honest, honest_log = agents.start(honest_acct, "honest", "honest", "--log-format", "json")
            bad, bad_log = agents.start(bad_acct, "cheater", "corrupt-value:step=3,node=9")
            m = _deadlines(chain, v, (honest_acct, bad_acct))
            before = chain.w3.eth.get_balance(honest_acct.address)  # its stake is in
            node.stop(keep_port=True)
            _until(lambda: all("lost the node" in f.read_text() for f in (honest_log, bad_log)),
                   "both agents to notice")
            assert honest.poll() is None and bad.poll() is None, "an agent gave up instead of waiting"
            node.start()
            assert v.match_state(m)["phase"] != PHASE_DONE, "the dispute ended before the restart: nothing was tested"
            _honest_won(chain, v, m, honest_acct, before, honest, honest_log)
            records = [json.loads(line) for line in honest_log.read_text().splitlines() if line.startswith("{")]
            msgs = [r["msg"] for r in records if r["logger"] == "verde.agent"]
            assert any("the node is back" in m for m in msgs) and any("withdraw" in m for m in msgs), msgs


def test_an_agent_that_cannot_pay_the_stake_says_so_and_joins_nothing(tmp_path, artifacts):
    from eth_account import Account
    with AnvilProcess() as node:
        chain, v, job_file, dep = _setup(node, tmp_path, artifacts)
        poor = Account.create()
        chain._send("fund", {"to": poor.address, "value": STAKE // 2}, chain.accounts[0])
        with _Agents(node, dep, job_file, tmp_path) as agents:
            p, log = agents.start(poor, "poor")
            assert p.wait(timeout=120) == 2
        out = " ".join(log.read_text().split())  # rich wraps lines
        assert "needs a stake of 1.0 ETH" in out and "Fix: fund this account" in out, out
        assert chain.w3.eth.get_transaction_count(poor.address) == 0  # sent nothing, spent nothing
        assert chain.w3.eth.get_balance(poor.address) == STAKE // 2
        assert not chain.call(v.registry.functions.seats(1, poor.address))[0]
