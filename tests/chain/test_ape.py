"""ape works offline with the registered solcjs shim, on the embedded chain and on Anvil."""
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
