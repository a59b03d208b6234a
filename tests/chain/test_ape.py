"""ape works offline with the registered solcjs shim, on the embedded chain and on Anvil."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from offchain.chain import AnvilProcess
from offchain.chain.anvil import port_in_use

ROOT = Path(__file__).resolve().parents[2]
APE = Path(sys.executable).parent / "ape"
pytestmark = pytest.mark.xdist_group("ape")  # one ape at a time: they share .build/


def _ape(*args, timeout=180):
    env = {**os.environ, "NO_COLOR": "1"}
    r = subprocess.run([str(APE), *args], cwd=ROOT, capture_output=True, text=True, env=env, timeout=timeout)
    return r.returncode, r.stdout + r.stderr


def test_ape_compile_offline():
    rc, out = _ape("compile", "--force")
    assert rc == 0, out[-3000:]
    assert "compiled" in out and "Float32Harness" in out


def test_ape_run_on_embedded_chain():
    rc, out = _ape("run", "deploy_harness")
    assert rc == 0, out[-3000:]
    assert "1.0 + 2.0 -> 0x40400000" in out


@pytest.mark.anvil
def test_ape_run_on_running_anvil():
    if port_in_use(8545):
        pytest.skip("port 8545 is busy; ape-config.yaml points ape-foundry at 127.0.0.1:8545")
    with AnvilProcess(port=8545):
        rc, out = _ape("run", "deploy_harness", "--network", "ethereum:local:foundry")
    assert rc == 0, out[-3000:]
    assert "1.0 + 2.0 -> 0x40400000" in out


def test_ape_verde_deploy_on_embedded_chain(tmp_path):
    """`ape run verde ...` runs the `verde` subcommands on ape's provider: here ape's own
    in-process chain, with ape's test account."""
    dep = tmp_path / "deployment.json"
    rc, out = _ape("run", "verde", "deploy", "--", "--out", str(dep))
    assert rc == 0, out[-3000:]
    assert "vanishes when this command exits" in out, out[-2000:]  # issue #22: said, not silent
    d = json.loads(dep.read_text())
    assert set(d) == {"chain_id", "registry", "game", "operators", "from_block", "created"} and len({d["registry"], d["game"]}) == 2


@pytest.mark.anvil
def test_ape_verde_status_and_post_on_a_running_node(tmp_path):
    """The ape scripts and the `verde` command are interchangeable on one node: deploy with
    ape (ad-hoc network URI), post with `verde`, read the status with ape."""
    sys.path.insert(0, str(ROOT / "tests" / "protocol"))
    from small_job import write_small_job
    key = "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d"  # the mnemonic's account 1
    dep, job = tmp_path / "deployment.json", write_small_job(tmp_path / "job")
    with AnvilProcess() as node:
        os.environ["VERDE_PRIVATE_KEY"] = key
        try:
            rc, out = _ape("run", "verde", "deploy", "--network", node.url, "--", "--out", str(dep))
            assert rc == 0, out[-3000:]
            r = subprocess.run([str(Path(sys.executable).parent / "verde"), "post", str(job), "--chain",
                                f"rpc:{node.url}", "--deployment", str(dep), "--payment", "1", "--stake", "0.5"],
                               capture_output=True, text=True, timeout=300)
            assert r.returncode == 0, r.stdout + r.stderr
            rc, out = _ape("run", "verde", "status", "--network", node.url, "--", "1", "--deployment", str(dep))
            assert rc == 0 and "job 1: open, payment 1.0 ETH" in " ".join(out.split()), out[-3000:]
            rc, out = _ape("run", "verde", "status", "--network", node.url, "--", "9", "--deployment", str(dep))
            assert rc == 2 and "no job 9" in out, out[-3000:]
        finally:
            del os.environ["VERDE_PRIVATE_KEY"]


@pytest.mark.anvil
def test_ape_from_any_directory_on_a_local_node_without_a_key(tmp_path):
    """Issue #41: ape finds `scripts/verde.py` only in the repository ("No such command
    'verde'" elsewhere), and `--network http://127.0.0.1:PORT` asked for a key on a local test
    node. `verde ape ...` runs ape there from any directory, a relative --out lands where the
    user stands, and a chain-id-31337 node signs with ape's test account (its funded one)."""
    env = {k: v for k, v in os.environ.items() if k not in ("VERDE_PRIVATE_KEY", "VERDE_KEYSTORE")}
    with AnvilProcess() as node:
        r = subprocess.run([str(APE), "run", "verde", "deploy", "--network", node.url], cwd=tmp_path,
                           capture_output=True, text=True, env={**env, "NO_COLOR": "1"}, timeout=180)
        assert r.returncode != 0 and "verde" in r.stdout + r.stderr  # plain ape outside: no such script
        r = subprocess.run([str(Path(sys.executable).parent / "verde"), "ape", "run", "verde", "deploy", "--network",
                            node.url, "--", "--out", "deployment.json"], cwd=tmp_path, capture_output=True, text=True,
                           env={**env, "NO_COLOR": "1"}, timeout=300)
        assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
        d = json.loads((tmp_path / "deployment.json").read_text())
        assert d["chain_id"] == 31337 and not (ROOT / "deployment.json").exists()
