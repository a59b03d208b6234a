"""README command 1 (`verde demo`) end to end, as a user runs it."""
import subprocess
import sys
from pathlib import Path

import pytest

VERDE = Path(sys.executable).parent / "verde"


@pytest.mark.parametrize("chain", ["embedded", pytest.param("anvil", marks=pytest.mark.anvil)])
def test_main_job_runs_and_reports(chain, tmp_path):
    """Three trainer agents as processes on a chain they share (the embedded chain served by
    its own process, or Anvil): they train, dispute and settle by themselves."""
    png = tmp_path / "report.png"
    work = tmp_path / "work"
    r = subprocess.run([str(VERDE), "demo", "--chain", chain, "--vectors", "12", "--steps", "6", "--report", str(png),
                        "--workdir", str(work)],
                       capture_output=True, text=True, timeout=900, env={"COLUMNS": "250", "PATH": "/usr/bin:/bin"})
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-3000:]
    assert "the off-chain dispute and the job settled on chain by agents OK" in out
    assert "identical bits" in out
    assert "to_int32_rne" in out  # every primitive is in the table
    # the agents were separate processes with their own state and logs
    for name in ("honest", "honest-2", "cheater"):
        log = (work / name / "agent.log").read_text()
        assert "commit (sealed result)" in log and "reveal" in log, log[-2000:]
        assert (work / name / "agent.sqlite").exists() and list((work / name / "trainer").glob("ckpt-*"))
    assert "withdraw" in (work / "honest" / "agent.log").read_text()
    assert "withdraw" not in (work / "cheater" / "agent.log").read_text()
    # the report: the cheater slashed at level 5, the honest paid, every level's gas
    assert "match 1: honest wins, cheater slashed" in out or "match 1: honest-2 wins, cheater slashed" in out, out
    assert "decided at level 5" in out
    # each honest trainer: its stake back + half of (payment + the cheater's stake, the pot)
    assert "honest 3.00 ETH, honest-2 3.00 ETH, cheater 0.00 ETH" in out
    for level in range(1, 6):
        assert f"│ {level}  " in out, out  # a row per level in the gas table
    assert "referee work vs re-running" in out and "accepted result: C_T = 0x" in out
    assert png.stat().st_size > 10_000


def test_bad_chain_spec_is_a_clear_error():
    r = subprocess.run([str(VERDE), "demo", "--chain", "ganache"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2
    assert "unknown chain backend 'ganache'" in r.stdout and "Fix:" in r.stdout
