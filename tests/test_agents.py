"""Trainer agents as separate processes on an Anvil node (`verde agent`): an honest one and
a cheater join, train, commit, reveal and settle; the dispute is played on chain by the
agents alone; the honest agent is killed with SIGKILL in the middle of the dispute,
restarted, and still wins and withdraws its payment and both stakes."""
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
from offchain.protocol.job import load

sys.path.insert(0, str(Path(__file__).resolve().parent / "protocol"))
from small_job import write_small_job  # noqa: E402

VERDE = Path(sys.executable).parent / "verde"
pytestmark = pytest.mark.anvil
PAY, STAKE = 2 * 10**18, 10**18


def _agent(node, dep, job_file, account, workdir, behaviour, name, log):
    env = {"PATH": "/usr/bin:/bin", "VERDE_PRIVATE_KEY": account.key.hex()}
    return subprocess.Popen([str(VERDE), "agent", str(job_file), "1", "--chain", f"rpc:{node.url}", "--deployment",
                             str(dep), "--workdir", str(workdir), "--behaviour", behaviour, "--name", name,
                             "--poll-s", "0.2"], env=env, stdout=log, stderr=subprocess.STDOUT)


def _until(cond, what, timeout=240, poll=0.3):
    t = time.time()
    while not cond():
        if time.time() - t > timeout:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(poll)


def test_agents_settle_a_dispute_and_the_honest_one_survives_kill_9(tmp_path, artifacts):
    with AnvilProcess() as node:
        chain = Chain(Web3(Web3.HTTPProvider(node.url)), _mnemonic_accounts(), "anvil", artifacts)
        job_file = write_small_job(tmp_path / "job")
        job = load(job_file)
        v = Verde.deploy(chain)
        dep = tmp_path / "deployment.json"
        dep.write_text(json.dumps(v.addresses()))
        v.post(job, Context(job), PAY, STAKE, max_trainers=2, client=chain.accounts[1])
        honest_acct, bad_acct = chain.accounts[2], chain.accounts[3]
        logs = {n: open(tmp_path / f"{n}.log", "w") for n in ("honest", "cheater", "honest-restarted")}
        honest = _agent(node, dep, job_file, honest_acct, tmp_path / "honest", "honest", "honest", logs["honest"])
        bad = _agent(node, dep, job_file, bad_acct, tmp_path / "cheater", "corrupt-value:step=3,node=10", "cheater",
                     logs["cheater"])
        try:
            seat = lambda a: chain.call(v.registry.functions.seats(1, a.address))  # noqa: E731
            _until(lambda: all(seat(a)[2] != bytes(32) for a in (honest_acct, bad_acct)), "both commitments")
            chain.advance(1300)  # past the commit deadline
            _until(lambda: all(seat(a)[3] != bytes(32) for a in (honest_acct, bad_acct)), "both reveals")
            chain.advance(600)  # past the reveal deadline: an agent settles, the registry asks for a match
            _until(lambda: v.game.events.MatchOpened().get_logs(from_block=0), "the match", poll=0.02)
            honest.send_signal(signal.SIGKILL)  # mid-dispute
            honest.wait()
            m = v.game.events.MatchOpened().get_logs(from_block=0)[0]["args"]["id"]
            assert v.match_state(m)["phase"] != PHASE_DONE, "the dispute ended before the kill: nothing was tested"
            honest = _agent(node, dep, job_file, honest_acct, tmp_path / "honest", "honest", "honest",
                            logs["honest-restarted"])
            before = chain.w3.eth.get_balance(honest_acct.address)
            assert honest.wait(timeout=300) == 0, (tmp_path / "honest-restarted.log").read_text()[-3000:]
            assert v.status(1)[2] == 3  # settled
            decided = v.decision(m)
            assert decided["winner"] == honest_acct.address and decided["level"] == 5
            assert v.owed(honest_acct.address) == 0  # withdrawn
            assert chain.w3.eth.get_balance(honest_acct.address) - before > PAY + STAKE  # payment + both stakes - gas
        finally:
            for p in (honest, bad):
                if p.poll() is None:
                    p.kill()
            for f in logs.values():
                f.close()
