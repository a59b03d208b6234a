"""The chain-facing `verde` subcommands against a running Anvil node, as separate
processes (the state lives on the node, not in the command): deploy, post, status,
withdraw, and the clear errors of a bad job file, a wrong key, a stale deployment and an
unreachable node."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from offchain.chain import AnvilProcess

sys.path.insert(0, str(Path(__file__).resolve().parent / "protocol"))
from small_job import write_small_job  # noqa: E402

VERDE = Path(sys.executable).parent / "verde"
KEY = "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80"  # Anvil's first test account

pytestmark = pytest.mark.anvil


@pytest.fixture(scope="module")
def node():
    with AnvilProcess() as n:
        yield n


def _here() -> dict:
    """PYTHONPATH as this test runs with (a worktree's copy of verde, not the installed one)."""
    return {"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else {}


def verde(*args, key=KEY):
    env = {"PATH": "/usr/bin:/bin", "COLUMNS": "200", **({"VERDE_PRIVATE_KEY": key} if key else {}), **_here()}
    r = subprocess.run([str(VERDE), *args], capture_output=True, text=True, timeout=300, env=env)
    return r.returncode, r.stdout + r.stderr


def test_deploy_post_status_withdraw(node, tmp_path):
    dep = tmp_path / "deployment.json"
    rc, out = verde("deploy", "--chain", f"rpc:{node.url}", "--out", str(dep))
    assert rc == 0, out
    assert json.loads(dep.read_text())["chain_id"] == 31337
    job = write_small_job(tmp_path / "job")
    rc, out = verde("post", str(job), "--chain", f"rpc:{node.url}", "--deployment", str(dep), "--payment", "1.5",
                    "--stake", "0.25")
    assert rc == 0 and "posted job 1" in out, out
    rc, out = verde("status", "1", "--chain", f"rpc:{node.url}", "--deployment", str(dep))
    assert rc == 0 and "job 1: open, payment 1.5 ETH" in out, out
    rc, out = verde("status", "7", "--chain", f"rpc:{node.url}", "--deployment", str(dep))
    assert rc == 2 and "no job 7" in out, out
    rc, out = verde("withdraw", "--chain", f"rpc:{node.url}", "--deployment", str(dep))
    assert rc == 0 and "nothing owed" in out, out
    # reading needs no key; the first command that signs names the key to set
    rc, out = verde("status", "1", "--chain", f"rpc:{node.url}", "--deployment", str(dep), key=None)
    assert rc == 0 and "job 1: open" in out, out
    rc, out = verde("withdraw", "--chain", f"rpc:{node.url}", "--deployment", str(dep), key=None)
    assert rc == 2 and "no key is set" in out and "VERDE_PRIVATE_KEY" in out, out


def test_bad_input_is_a_clear_error_and_changes_nothing(node, tmp_path):
    dep = tmp_path / "deployment.json"
    assert verde("deploy", "--chain", f"rpc:{node.url}", "--out", str(dep))[0] == 0
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\nsteps: -3\n")
    rc, out = verde("post", str(bad), "--chain", f"rpc:{node.url}", "--deployment", str(dep), "--payment", "1",
                    "--stake", "1")
    assert rc == 2 and "Fix:" in out and "steps" in out, out
    rc, out = verde("status", "1", "--chain", f"rpc:{node.url}", "--deployment", str(dep), key="0x1234")
    assert rc == 2 and "not a valid secp256k1 private key" in out, out
    rc, out = verde("status", "1", "--chain", "rpc:http://127.0.0.1:9", "--deployment", str(dep))
    assert rc == 2 and "cannot reach an Ethereum node" in out, out
    stale = tmp_path / "stale.json"
    stale.write_text(json.dumps({**json.loads(dep.read_text()), "registry": "0x" + "11" * 20}))
    rc, out = verde("status", "1", "--chain", f"rpc:{node.url}", "--deployment", str(stale))
    assert rc == 2 and "no JobRegistry at" in out and "verde deploy" in out, out
    rc, out = verde("post", str(write_small_job(tmp_path / "job")), "--chain", f"rpc:{node.url}", "--deployment",
                    str(dep), "--payment", "-1", "--stake", "1")
    assert rc == 2 and "must be positive" in out, out
    rc, out = verde("status", "1", "--chain", f"rpc:{node.url}", "--deployment", str(dep))
    assert rc == 2 and "no job 1" in out, out  # nothing was posted by the failed commands



def test_an_unfunded_key_and_bad_numbers_are_clear_errors(node, tmp_path):
    """Issue #22: an unfunded client key on deploy/post was 44 lines of Web3RPCError, and
    --max-trainers -1 an ABI dump; terms below the registry's floors name the flag."""
    dep = tmp_path / "deployment.json"
    assert verde("deploy", "--chain", f"rpc:{node.url}", "--out", str(dep))[0] == 0
    poor = "0x" + "42" * 32  # a valid key nobody funded
    rc, out = verde("deploy", "--chain", f"rpc:{node.url}", "--out", str(tmp_path / "d2.json"), key=poor)
    assert rc == 2 and "cannot pay for deploy" in out and "Fix: fund this key" in out, out
    assert "Traceback" not in out
    job = str(write_small_job(tmp_path / "job"))
    args = ("--chain", f"rpc:{node.url}", "--deployment", str(dep), "--payment", "1", "--stake", "1")
    rc, out = verde("post", job, *args, key=poor)
    assert rc == 2 and "cannot pay for post" in out and "Traceback" not in out, out
    rc, out = verde("post", job, *args, "--max-trainers", "-1")
    assert rc == 2 and "--max-trainers" in out and "between 1 and 255" in out, out
    rc, out = verde("post", job, *args, "--clock-s", "5")  # (Anvil: the local profile's floor)
    assert rc == 2 and "accepts no less than 60 s" in out and "--clock-s 60" in out, out
    rc, out = verde("status", "1", "--chain", f"rpc:{node.url}", "--deployment", str(dep))
    assert rc == 2 and "no job 1" in out, out  # nothing was posted


def test_chain_and_deployment_from_the_environment_or_verde_toml_and_keys(node, tmp_path):
    """Issue #22: every command used to repeat --chain and --deployment. The flag, else
    VERDE_CHAIN/VERDE_DEPLOYMENT, else ./verde.toml; a bad config file is a clear error;
    `verde key new|show`."""
    def run(*args, env=(), cwd=tmp_path):
        e = {"PATH": "/usr/bin:/bin", "COLUMNS": "200", "VERDE_PRIVATE_KEY": KEY, **_here(), **dict(env)}
        r = subprocess.run([str(VERDE), *args], capture_output=True, text=True, timeout=300, env=e, cwd=cwd)
        return r.returncode, r.stdout + r.stderr
    rc, out = run("deploy", env={"VERDE_CHAIN": f"rpc:{node.url}", "VERDE_DEPLOYMENT": str(tmp_path / "d.json")})
    assert rc == 0 and (tmp_path / "d.json").exists(), out
    (tmp_path / "verde.toml").write_text(f'chain = "rpc:{node.url}"\ndeployment = "d.json"\n')
    rc, out = run("status", "1")
    assert rc == 2 and "no job 1" in out, out  # reached the chain and the registry, from verde.toml alone
    rc, out = run("status", "1", "--chain", "rpc:http://127.0.0.1:9")
    assert rc == 2 and "cannot reach" in out, out  # the flag wins
    (tmp_path / "verde.toml").write_text("chain = rpc:oops\n")
    rc, out = run("status", "1")
    assert rc == 2 and "cannot read the config file" in out and "Traceback" not in out, out
    rc, out = run("status", "1", cwd=tmp_path / "..")
    assert rc == 2 and "no chain given" in out and "VERDE_CHAIN" in out, out
    rc, out = run("key", "show")
    assert rc == 0 and "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266" in out, out  # Anvil's first account
    rc, out = run("key", "new", "--keystore", str(tmp_path / "k.json"), env={"VERDE_KEYSTORE_PASSWORD": "pw"})
    assert rc == 0, out
    rc, out = run("key", "show", env={"VERDE_PRIVATE_KEY": "", "VERDE_KEYSTORE": str(tmp_path / "k.json"),
                                      "VERDE_KEYSTORE_PASSWORD": "pw"})
    assert rc == 0 and "from keystore" in out, out
