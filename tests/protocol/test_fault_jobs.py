"""Issue #42: a faulting job is a claim like any other (docs/PROTOCOL.md §6). A job whose data
makes step 3 of 6 fault (a label outside the classes; a division by zero computed in forward,
which no data scan sees: the one played on chain, since Verde.post refuses the other) ends every
honest trainer's run with the same fault claim, on any
backend; each cheater that argues with it loses, at the level its lie is caught, off chain in
both seats and on chain, where the honest trainer gets its stake back, the cheater's, and pay
for the 3 steps done (the rest of the payment goes back to the client); a claim of a fault
where none is loses at level 5; and a dispute that reaches a node the chain cannot settle (a
job posted straight to the registry) is void with both stakes returned, never a loss."""
import pytest

from offchain.chain.verde import Verde, commitments
from offchain.dispute.context import Context
from offchain.protocol.claims import fault_claim, step_claim
from offchain.protocol.jobfile import load
from offchain.protocol.trace import decode_node, decode_structure
from offchain.trainer import Trainer
from offchain.trainer import adversaries as A
from playing import honest_wins_off_chain, off_chain, trained
from small_job import write_unsettled_integer_job, write_division_fault_job, write_fault_job

PAY, STAKE, STEPS, FAULT = 3 * 10**18, 10**18, 6, 3
CHEATERS = [(A.FaultIgnorer(), 5), (A.FaultStepLiar(), 2), (A.FaultTrailer(), 2), (A.FaultKernelCopier(), 3),
            (A.Lazy(), 2)]


@pytest.fixture(scope="module")
def fault_job(tmp_path_factory):
    d = tmp_path_factory.mktemp("fault")
    return (*trained(write_fault_job(d / "job"), d), d)


@pytest.fixture(scope="module")
def division_job(tmp_path_factory):
    """The fault no data scan sees (Verde.post refuses a label out of range before posting)."""
    d = tmp_path_factory.mktemp("division")
    return (*trained(write_division_fault_job(d / "job"), d), d)


def test_every_honest_trainer_ends_the_run_with_the_same_fault_claim(fault_job):
    job, ctx, honest, d = fault_job
    f = honest.faulted()
    assert honest.fault_step == FAULT and f.rule == "index"
    assert honest.final_claim() == fault_claim(FAULT, f.tree.root)
    # the fault node is the graph's node there, with the graph's structure, and faults at a fault.bool
    _, _, (k, e) = decode_node(f.nodes[-1].encode())
    assert f.nodes[-1].structure() == ctx.graph.structures[f.node]
    assert decode_structure(ctx.graph.structures[f.node])[0] == "aten.nll_loss_forward.default"
    assert [n.structure() for n in f.nodes[:-1]] == ctx.graph.structures[:f.node]
    # claims: the steps before are ordinary, every point after the fault is the fault claim
    claims = honest.claim_at(list(range(STEPS + 1)))
    assert claims[FAULT + 1:] == [honest.final_claim()] * (STEPS - FAULT)
    assert len(set(claims[:FAULT + 1])) == FAULT + 1 and honest.final_claim() not in claims[:FAULT + 1]
    assert claims[FAULT] == step_claim(*honest.open_claim(FAULT))
    # another backend (the CUDA sources, emulated), and a restart of the same workdir
    emu = Trainer(job, d / "emu", "emu", backend="cuda-emu")
    assert emu.train() == honest.final_claim() and emu.fault_step == FAULT
    again = Trainer(job, d / "honest", "honest-restarted")
    assert again.train() == honest.final_claim()


@pytest.mark.parametrize("behaviour,level", CHEATERS, ids=[b.name for b, _ in CHEATERS])
def test_every_cheater_against_the_fault_claim_loses_off_chain(fault_job, behaviour, level):
    job, ctx, honest, d = fault_job
    bad = Trainer(job, d / behaviour.name, behaviour.name, behaviour=behaviour)
    bad.train()
    assert bad.final_claim() != honest.final_claim()
    for v in honest_wins_off_chain(ctx, honest, bad):  # (the lazy one is caught at its first skipped step)
        assert v.level == level and (v.step == FAULT or behaviour.name == "lazy"), str(v)


def test_a_fault_claimed_where_none_is_loses_at_level_5(job, ctx, honest, tmp_path):
    liar = Trainer(job, tmp_path / "false", "false-fault", behaviour=A.FalseFault(step=2))
    liar.train()
    assert liar.fault_step == 2
    for v in honest_wins_off_chain(ctx, honest, liar):
        assert v.level == 5 and "fault.bool" in v.reason


def test_a_division_by_zero_no_data_scan_sees_is_a_fault_claim_too(division_job):
    from offchain.protocol.datacheck import check
    job, ctx, honest, d = division_job
    check(job)  # the labels are computed in forward: the scan passes
    assert honest.fault_step == FAULT and honest.faulted().rule == "division"
    bad = Trainer(job, d / "ignorer", "fault-ignorer", behaviour=A.FaultIgnorer())
    bad.train()
    assert off_chain(ctx, bad, honest).losers == [bad.name]


@pytest.mark.parametrize("behaviour,level", CHEATERS, ids=[b.name for b, _ in CHEATERS])
def test_on_chain_the_fault_claim_wins_and_is_paid_for_the_steps_done(settle_match, division_job, behaviour, level):
    job, ctx, honest, d = division_job
    bad = Trainer(job, d / behaviour.name, behaviour.name, behaviour=behaviour)
    bad.train()
    r = settle_match(job, ctx, bad, honest, pay=PAY, stake=STAKE)
    assert r.decision["winner"] == r.second and r.decision["level"] == level, r.decision
    done = PAY * FAULT // STEPS
    assert r.v.owed(r.second) == STAKE + STAKE + done and r.v.owed(r.first) == 0  # its stake, the pot, 3 of 6 steps
    client = r.v.status(1)[0]
    assert r.v.owed(client) == PAY - done  # the steps not done, back to the client
    (ev,) = r.v.registry.events.FaultAccepted().get_logs(from_block=r.v.from_block)
    assert (ev["args"]["step"], ev["args"]["paid"], ev["args"]["refunded"]) == (FAULT, done, PAY - done)
    assert r.v.hold(1, r.second).amount == 0  # a fault has no model to deliver: nothing held


def _post_past_the_checks(v, chain, job, ctx) -> int:
    """What Verde.post (and every honest agent) refuses, sent straight to the registry."""
    now = chain.now()
    terms = (*commitments(job, ctx), 2, STAKE, now + 600, now + 1200, now + 1800, 3600)
    chain.transact(v.registry.functions.post(terms), sender=chain.accounts[1], value=PAY)
    return 1


def test_a_dispute_reaching_a_node_the_chain_cannot_settle_is_void_with_stakes_returned(embedded, tmp_path):
    job = load(write_unsettled_integer_job(tmp_path / "job"))
    ctx = Context(job)
    (j, op), = ctx.kernel_graph.unsettled
    honest = Trainer(job, tmp_path / "honest", "honest")
    bad = Trainer(job, tmp_path / "bad", "corrupt-value", behaviour=A.CorruptValue(step=1, node=j))
    honest.train(), bad.train()
    assert off_chain(ctx, bad, honest).losers == [bad.name]  # off chain the referee's own run decides it
    v = Verde.deploy(embedded)
    jid = _post_past_the_checks(v, embedded, job, ctx)
    seats = [(embedded.accounts[2], bad), (embedded.accounts[3], honest)]
    salts = {a.address: v.join_and_commit(jid, job.job_id, t.final_claim(), STAKE, a) for a, t in seats}
    embedded.advance(1300)
    for a, t in seats:
        v.reveal(jid, t.final_claim(), salts[a.address], a)
    embedded.advance(600)
    v.settle(jid)
    m = v.open_match(jid, *sorted(a.address for a, _ in seats))
    v.play(m, seats, ctx, max_rounds=160)
    assert v.decision(m) is None  # nobody was decided wrong
    (ev,) = v.registry.events.Unsettleable().get_logs(from_block=v.from_block)
    assert {ev["args"]["a"], ev["args"]["b"]} == {a.address for a, _ in seats}
    for a, _ in seats:  # both out, both stakes back; nobody accepted: the client has its payment back
        assert v.owed(a.address) == STAKE
    assert v.status(jid)[2] == 3 and v.owed(embedded.accounts[1].address) == PAY


def test_a_fault_one_rank_of_a_data_parallel_run_meets_is_the_same_fault_claim(tmp_path):
    """Two processes, two micro-batches: the bad row is in one rank's half. The run stops, the
    trainer finds the fault again in one process and claims what a single process claims."""
    from offchain.protocol.dataset import write_program_job
    from small_job import CLASSIFIER, Classifier, classifier_data, first_read_at
    data = classifier_data()
    data["y"][first_read_at(FAULT)] = CLASSIFIER["classes"]
    job = load(write_program_job(tmp_path / "job", Classifier(CLASSIFIER["classes"]), data, ["x", "y"], steps=STEPS,
                                 batch_size=CLASSIFIER["batch_size"], fanout=2, chunk=64, micro_batches=2))
    one, two = Trainer(job, tmp_path / "one", "one"), Trainer(job, tmp_path / "two", "two", world_size=2)
    assert two.train() == one.train() and two.fault_step == one.fault_step == FAULT
    from offchain.trainer.distributed import faulted_at
    assert faulted_at(two.store.dir) == FAULT  # a rank met it (the 2-process run was the one that stopped)
