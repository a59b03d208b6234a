"""README command 1 (`verde demo`) end to end, as a user runs it."""
import subprocess
import sys
from pathlib import Path

import pytest

VERDE = Path(sys.executable).parent / "verde"


@pytest.mark.parametrize("chain", ["embedded", pytest.param("anvil", marks=pytest.mark.anvil)])
def test_main_job_runs_and_reports(chain, tmp_path):
    png = tmp_path / "report.png"
    r = subprocess.run([str(VERDE), "demo", "--chain", chain, "--vectors", "12", "--steps", "6", "--report", str(png)],
                       capture_output=True, text=True, timeout=600, env={"COLUMNS": "160", "PATH": "/usr/bin:/bin"})
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-3000:]
    assert "the off-chain dispute and the job settled on chain OK" in out
    assert png.stat().st_size > 10_000
    assert "honest 3.50 ETH, honest-2 2.50 ETH, cheater 0.00 ETH" in out  # the cheater's stake went to the winner
    assert "cheater lose at level 5" in out
    assert "identical bits" in out
    assert "to_int32_rne" in out  # every primitive is in the table


def test_bad_chain_spec_is_a_clear_error():
    r = subprocess.run([str(VERDE), "demo", "--chain", "ganache"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2
    assert "unknown chain backend 'ganache'" in r.stdout and "Fix:" in r.stdout
