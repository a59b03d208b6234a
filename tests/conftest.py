"""Shared fixtures: compiled artifacts and one chain per backend per test worker."""
import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent
os.environ.setdefault("SOLCX_BINARY_PATH", str(ROOT / ".venv" / "solcx"))


@pytest.fixture(scope="session")
def artifacts():
    from offchain.chain import compile_contracts
    return compile_contracts()


@pytest.fixture(scope="session")
def embedded(artifacts):
    from offchain.chain import connect
    with connect("embedded", artifacts) as chain:
        yield chain


@pytest.fixture(scope="session")
def anvil(artifacts):
    from offchain.chain import connect
    with connect("anvil", artifacts) as chain:
        yield chain


@pytest.fixture(params=["embedded", pytest.param("anvil", marks=pytest.mark.anvil)])
def chain(request):
    """Runs a test body once per local backend."""
    return request.getfixturevalue(request.param)


def pytest_collection_modifyitems(config, items):
    # The end-to-end tests at the top of tests/ (processes, chains, protocol windows: 15-160 s
    # each) are collected last; started last, one worker runs them alone while the other idles.
    # Scheduled first (a stable sort: the order within each part is unchanged), they overlap the rest.
    items.sort(key=lambda item: item.path.parent != TESTS)
    if shutil.which("node") is None:
        skip = pytest.mark.skip(reason="Node.js not on PATH: contracts cannot be compiled (run scripts/bootstrap.sh)")
        for item in items:
            if "chain" in item.fixturenames or "artifacts" in item.fixturenames:
                item.add_marker(skip)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """VERDE_CPU_LOG=FILE: one JSON line per test, its CPU seconds (this worker's and the child
    processes it reaped: the nodes, agents and CLI commands a test runs) beside its wall
    seconds, with its worker and end time (the report shows each worker's idle tail). The suite is CPU-bound on CI's 2 cores, so CPU, not --durations' wall time, is
    what a cut saves (scripts/cpu_report.py sums it per test and per file)."""
    log = os.environ.get("VERDE_CPU_LOG")
    if not log:
        yield
        return
    import json
    import resource
    import time

    def cpu():
        return sum(r.ru_utime + r.ru_stime for r in (resource.getrusage(resource.RUSAGE_SELF),
                                                     resource.getrusage(resource.RUSAGE_CHILDREN)))
    c0, t0 = cpu(), time.monotonic()
    yield
    with open(log, "a") as f:
        f.write(json.dumps({"test": item.nodeid, "cpu_s": round(cpu() - c0, 2),
                            "wall_s": round(time.monotonic() - t0, 2), "end": round(time.time(), 2),
                            "worker": os.environ.get("PYTEST_XDIST_WORKER", "main")}) + "\n")


class Settled:
    """A match played to its end on chain: the Verde client, the match, its decision, the
    seats' addresses, and what the job paid and staked."""

    def __init__(self, v, m, first, second, pay, stake):
        self.v, self.m, self.first, self.second, self.pay, self.stake = v, m, first, second, pay, stake
        self.decision = v.decision(m)

    def paid_and_slashed(self, winner, loser) -> bool:
        """The winner withdraws the payment and both stakes; the loser nothing."""
        return self.v.owed(winner) == self.pay + 2 * self.stake and self.v.owed(loser) == 0


@pytest.fixture
def settle_match(embedded):
    """play(job, ctx, first, second): deploy, deliver `job` with trainers `first` and `second`
    seated in that order (3 ETH payment, 1 ETH stakes), open their match and play it to the
    end on the embedded chain -> Settled."""
    def play(job, ctx, first, second, max_rounds=160, pay=3 * 10**18, stake=10**18):
        from offchain.chain.verde import PHASE_DONE, Verde
        v = Verde.deploy(embedded)
        client, a, b = embedded.accounts[1], embedded.accounts[2], embedded.accounts[3]
        seats = [(a, first), (b, second)]
        jid, _ = v.deliver(job, ctx, seats, pay, stake, client)
        m = v.open_match(jid, a.address, b.address)
        v.play(m, seats, ctx, max_rounds=max_rounds)
        assert v.match_state(m)["phase"] == PHASE_DONE
        return Settled(v, m, a.address, b.address, pay, stake)
    return play
