"""README command 1 (`verde demo`) end to end, as a user runs it."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

VERDE = Path(sys.executable).parent / "verde"


def test_main_job_runs_and_reports(tmp_path):
    """The README's command in full: three trainer agents as processes on a chain they share
    (the embedded chain served by its own process): they train, dispute and settle by
    themselves. (`--chain anvil` runs the same flow: the stop test below runs it on Anvil up
    to the agents' joins, and tests/test_agent_security.py settles every kind of job on Anvil
    with the same agents; a full demo on Anvil was 60-80 s of CI.)"""
    png = tmp_path / "report.png"
    work = tmp_path / "work"
    r = subprocess.run([str(VERDE), "demo", "--vectors", "12", "--steps", "6", "--report", str(png), "--workdir", str(work)],
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
    # each honest trainer: its stake back + half of (payment + the cheater's stake, the pot);
    # honest-2 also the bond of the one chunk the client spot-checked on chain (0.007 ETH)
    assert "honest 3.00 ETH, honest-2 3.01 ETH, cheater 0.00 ETH" in out
    for level in range(1, 6):
        assert f"│ {level}  " in out, out  # a row per level in the gas table
    assert "referee work vs re-running" in out and "accepted result: C_T = 0x" in out
    assert png.stat().st_size > 10_000


def test_bad_chain_spec_is_a_clear_error():
    r = subprocess.run([str(VERDE), "demo", "--chain", "ganache"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2
    assert "unknown chain backend 'ganache'" in r.stdout and "Fix:" in r.stdout


def _descendants(pid: int) -> set[int]:
    """Every live process below pid (by /proc parent links)."""
    parents = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[0] != "Z":
                parents[int(d.name)] = int(fields[1])
    out, todo = set(), [pid]
    while todo:
        p = todo.pop()
        kids = [c for c, pp in parents.items() if pp == p]
        out.update(kids)
        todo += kids
    return out


def _cmdline(pid: int) -> str:
    try:
        return (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _alive(pids) -> set[int]:
    out = set()
    for p in pids:
        try:
            if (Path("/proc") / str(p) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                out.add(p)
        except OSError:
            pass
    return out


def _as_at_a_terminal():
    """A Ctrl-C reaches the demo as at a terminal: SIGINT to its default (Python's
    KeyboardInterrupt). A suite started as a background job of a non-interactive shell
    (`bash scripts/test.sh &`) runs with SIGINT ignored, which every child inherits and Python
    keeps (POSIX's background semantics), so the demo rightly ignored the test's SIGINT: the
    "lost SIGINT" of 2026-11-28's clean-clone runs, all started that way."""
    import signal
    signal.signal(signal.SIGINT, signal.SIG_DFL)


# each signal once and each phase once (CI time: every case runs a demo, 20-46 s); the agents'
# phase on Anvil, whose node is one more process of its own to stop
@pytest.mark.parametrize("sig,when,chain", [pytest.param("SIGTERM", "agents", "anvil", marks=pytest.mark.anvil),
                                            ("SIGINT", "off-chain dispute", "embedded")])
def test_stopping_the_demo_stops_every_process_it_started(tmp_path, sig, when, chain):
    """Issue #22: SIGTERM used to orphan the three agents (they spun on the dead node for
    up to 10 minutes). Stopped while its agents run, or while its off-chain cheater process
    runs, `verde demo` leaves no process behind, with either signal."""
    import signal
    import time
    work = tmp_path / "work"
    err = open(tmp_path / "demo.err", "w+")
    # (PYTHONFAULTHANDLER: a demo that does not end is sent SIGABRT below, and says where each thread was)
    p = subprocess.Popen([str(VERDE), "demo", "--chain", chain, "--vectors", "2", "--steps", "4", "--workdir", str(work),
                          "--report", str(tmp_path / "r.png")], stdout=subprocess.DEVNULL, stderr=err,
                         env={"COLUMNS": "250", "PATH": "/usr/bin:/bin", "PYTHONFAULTHANDLER": "1"},
                         start_new_session=True, preexec_fn=_as_at_a_terminal)
    try:
        logs = [work / n / "agent.log" for n in ("honest", "honest-2", "cheater")]
        # the off-chain dispute: its cheater's transport process is up (any child was the test's
        # sign before, and a short-lived one, e.g. a `gcc --version` probe, came first in one run)
        ready = ((lambda: all(f.exists() and "join (stake)" in f.read_text() for f in logs))  # playing the job
                 if when == "agents" else (lambda: any("offchain.dispute.transport" in _cmdline(c)
                                                      for c in _descendants(p.pid))))
        t0 = time.time()
        while not ready():
            assert p.poll() is None and time.time() - t0 < 400, f"the demo ended before {when} ran"
            time.sleep(0.2)
        time.sleep(1)
        started = _descendants(p.pid)
        assert started, "no child process to check"
        p.send_signal(getattr(signal, sig))
        try:
            assert p.wait(timeout=60) != 0
        except subprocess.TimeoutExpired:
            p.send_signal(signal.SIGABRT)
            p.wait(timeout=30)
            err.seek(0)
            pytest.fail(f"the demo did not end within 60 s of {sig}; where it was:\n{err.read()[-6000:]}")
        t0 = time.time()
        while _alive(started) and time.time() - t0 < 10:
            time.sleep(0.2)
        assert not _alive(started), f"left running after {sig}: {sorted(_alive(started))}"
    finally:
        if p.poll() is None:
            os.killpg(p.pid, 9)
        err.close()
