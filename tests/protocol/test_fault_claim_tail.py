"""A fault claim against a cheater that AGREES with it for a while (found by a red-team pass).

An honest run whose step s faults claims F = H(0x06 || H(0x0A || u32 s) || R^f) at every point
p > s (docs/PROTOCOL.md §6). A cheater that claims F up to T - 1 too, and at T something else on
the same trace R^f, moves level 1's first difference past the fault step: lo = T - 1 > s. Level 2
looked only for the fault state of the disputed step lo, so the match went to the state trees,
which a fault claim does not have, and the honest party lost (in either seat, off chain and on
chain); a cheater claiming a fault AT lo on the honest trace could even show the honest trace's
fault node and win. Now the agreed claim C_lo being a fault claim decides: only a claim that
repeats it is one (`level2_nodes.play`; on chain `DisputeGame.showEarlierFault`, and `openStep`
refusing a fault at lo when the other repeats the agreed claim)."""
import pytest

from offchain.dispute.party import InProcess, Party
from offchain.dispute.referee import dispute
from offchain.protocol.claims import fault_state, step_claim
from offchain.protocol.dataset import state_tree
from offchain.trainer import Trainer
from offchain.trainer import adversaries as A
from playing import trained
from small_job import write_division_fault_job, write_fault_job

STEPS, FAULT = 6, 3
PAY, STAKE = 3 * 10**18, 10**18


class FaultTail:
    """A cheater's endpoint: the honest (faulting) trainer's answers, but for the last point,
    where it claims, on the honest fault trace, a result (a state tree it can open: the honest
    one at the fault step) or a fault of the last step (`fault_at_end`)."""

    def __init__(self, honest: Trainer, fault_at_end: bool = False):
        self._h = honest
        self.behaviour = A.Honest()
        self.name = "fault-tail"
        self.steps = honest.steps
        self._leaves = honest.state_leaves(FAULT)
        state = fault_state(self.steps - 1) if fault_at_end else state_tree(self._leaves).root
        self._opened = (state, honest.faulted().tree.root)
        self._claim = step_claim(*self._opened)

    def final_claim(self):
        return self._claim

    def claim_at(self, ps):
        return [self._claim if p == self.steps else c for p, c in zip(ps, self._h.claim_at(list(ps)))]

    def open_claim(self, p):
        return self._opened if p == self.steps else self._h.open_claim(p)

    def state_leaves(self, p):
        return list(self._leaves) if p == self.steps else self._h.state_leaves(p)

    def __getattr__(self, name):
        return getattr(self._h, name)


@pytest.fixture(scope="module")
def fault_job(tmp_path_factory):
    d = tmp_path_factory.mktemp("faulttail")
    return (*trained(write_fault_job(d / "job"), d), d)


@pytest.mark.parametrize("fault_at_end", [False, True], ids=["result", "later-fault"])
@pytest.mark.parametrize("honest_seat", [0, 1])
def test_a_fault_claim_beats_a_claim_on_its_trace_after_the_fault_step_off_chain(fault_job, honest_seat, fault_at_end):
    job, ctx, honest, d = fault_job
    assert honest.fault_step == FAULT and job.spec.steps == STEPS
    bad = FaultTail(honest, fault_at_end)
    assert bad.final_claim() != honest.final_claim()
    parties = [Party("honest", InProcess(honest), deadline_s=120, final=honest.final_claim()),
               Party("fault-tail", InProcess(bad), deadline_s=120, final=bad.final_claim())]
    if honest_seat == 1:
        parties.reverse()
    v = dispute(ctx, *parties)
    assert v.winner == "honest" and v.losers == ["fault-tail"], str(v)
    assert v.level == 2 and "faulted at step 3" in v.reason, str(v)


@pytest.fixture(scope="module")
def division_job(tmp_path_factory):
    d = tmp_path_factory.mktemp("faulttaildiv")
    return (*trained(write_division_fault_job(d / "job"), d), d)


@pytest.mark.parametrize("fault_at_end", [False, True], ids=["result", "later-fault"])
def test_a_fault_claim_beats_a_claim_on_its_trace_after_the_fault_step_on_chain(embedded, division_job, fault_at_end):
    from offchain.chain.verde import PHASE_DONE, Verde
    job, ctx, honest, d = division_job
    assert honest.fault_step == FAULT
    bad = FaultTail(honest, fault_at_end)
    v = Verde.deploy(embedded)
    client, a, b = embedded.accounts[1], embedded.accounts[2], embedded.accounts[3]
    seats = [(a, bad), (b, honest)]  # the honest party in seat 1: seat 0 is no advantage to it
    jid, _ = v.deliver(job, ctx, seats, PAY, STAKE, client)
    m = v.open_match(jid, a.address, b.address)
    assert v.play(m, seats, ctx) == PHASE_DONE
    decided = v.decision(m)
    assert decided["winner"] == b.address and decided["level"] == 2, decided
    assert "after" in decided["reason"] and "fault it agreed with" in decided["reason"], decided
    v.settle_decided(m)
    assert v.owed(b.address) > 0 and v.owed(a.address) == 0
