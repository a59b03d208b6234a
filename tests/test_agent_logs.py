"""What an agent says (issue #41): its behaviours listed one line each and a cheat aimed at
what the job lacks refused before anything is staked; progress in a redirected log without
carriage returns; "resuming at step N" after a restart; a race another party won at debug
level; and, when it is stopped holding a committed stake, the deadline it must be back by."""
import logging
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "protocol"))
from small_job import STEPS, write_small_job  # noqa: E402

from offchain.protocol.jobfile import load  # noqa: E402
from offchain.trainer import Trainer  # noqa: E402
from offchain.trainer import adversaries  # noqa: E402

VERDE = Path(sys.executable).parent / "verde"


def _verde(*args):
    import os
    env = {"PATH": "/usr/bin:/bin", "COLUMNS": "200", **({"PYTHONPATH": os.environ["PYTHONPATH"]}
                                                         if os.environ.get("PYTHONPATH") else {})}
    r = subprocess.run([str(VERDE), *args], capture_output=True, text=True, timeout=300, env=env)
    return r.returncode, r.stdout + r.stderr


@pytest.fixture(scope="module")
def job_file(tmp_path_factory):
    return write_small_job(tmp_path_factory.mktemp("logs") / "job")


def test_behaviour_help_lists_every_behaviour_on_one_line_each():
    rc, out = _verde("agent", "--behaviour", "help")
    assert rc == 0, out
    lines = [x for x in out.splitlines() if x.startswith("  ")]
    assert sorted(x.split()[0].split(":")[0] for x in lines) == sorted(adversaries.BEHAVIOURS)
    assert any(x.split()[0] == "corrupt-value:step=1,node=9,element=0,ulps=1" for x in lines), out


@pytest.mark.parametrize("spec,said", [
    ("corrupt-value:step=20,node=5", "step=20 is not a step of this job (it has steps 0 to 5)"),
    ("corrupt-value:step=2,node=5000", "node=5000 is not a node of a step (a step has"),
    ("inplace-result-liar:op=aten.nope.default", "op='aten.nope.default' is not run by any node of a step"),
])
def test_a_cheat_aimed_at_what_the_job_lacks_is_refused_before_any_chain(job_file, spec, said):
    rc, out = _verde("agent", str(job_file), "1", "--workdir", "/nonexistent/w", "--behaviour", spec,
                     "--chain", "rpc:http://127.0.0.1:9")  # (no node there: refused before connecting)
    assert rc == 2 and said in out and "--behaviour help" in out, out


def test_a_cheat_the_job_has_a_target_for_passes_the_check(job_file):
    from offchain.dispute.context import Context
    from offchain.protocol.trace import decode_structure
    job = load(job_file)
    ops = [decode_structure(s)[0] for s in Context(job).graph.structures]
    adversaries.check_target(adversaries.from_spec("corrupt-value:step=5,node=3"), STEPS, ops)
    adversaries.check_target(adversaries.from_spec(f"tampered-input:op={ops[2]}"), STEPS, ops)


def test_progress_in_a_redirected_log_has_no_carriage_returns_and_a_restart_says_where_it_resumes(job_file, tmp_path,
                                                                                                   caplog, capsys):
    job = load(job_file)
    with caplog.at_level(logging.INFO, logger="verde.trainer"):
        Trainer(job, tmp_path / "t", "a", progress=True).train()
        first = [r.getMessage() for r in caplog.records]
        store = Trainer(job, tmp_path / "t", "a").store
        store._ckpt(STEPS).unlink()  # the run stopped after its last mark before the end
        caplog.clear()
        Trainer(job, tmp_path / "t", "a", progress=True).train()
    err = capsys.readouterr().err
    assert "\r" not in err, "tqdm's carriage returns in a log that is not a terminal"
    assert f"a training: step 0 of {STEPS}" in first and f"a training: step {STEPS} of {STEPS}" in first, first
    resumed = max(s for s in store.steps() if s < STEPS)
    assert f"a: resuming at step {resumed} of {STEPS} (the checkpoint in {store.dir})" in [
        r.getMessage() for r in caplog.records], caplog.records


def test_a_race_lost_is_debug_and_a_stopped_agent_says_its_reveal_deadline(job_file, tmp_path, embedded, caplog,
                                                                           monkeypatch):
    from offchain.agent.trainer_agent import TrainerAgent
    from offchain.chain.errors import TransactionReverted
    from offchain.chain.verde import Verde
    from offchain.dispute.context import Context
    job = load(job_file)
    ctx = Context(job)
    v = Verde.deploy(embedded)
    jid = v.post(job, ctx, 10**18, 10**17, client=embedded.accounts[1])
    agent = TrainerAgent(v, embedded.accounts[2], job, jid, tmp_path / "a", ctx=ctx)
    assert agent.at_risk() is None  # nothing staked yet
    for _ in range(3):  # join, then train and commit
        agent.tick()
    assert agent._seat()[2] != bytes(32), "not committed"
    said = agent.at_risk()
    assert f"its stake of 0.1 ETH in job {jid} is committed and not revealed" in said, said
    assert "before the reveal deadline" in said and "UTC (in " in said and "--workdir" in said, said
    v.chain.advance(601)  # past the join deadline: its one seat is every seat, the reveal and settle open early
    agent.tick()
    assert agent._seat()[3] != bytes(32), "not revealed"
    said = agent.at_risk()  # not "after the reveal deadline": a cheater's early settle starts the match now
    assert "a match may start now" in said and "dispute clock" in said, said

    def lost(*a, **k):
        raise TransactionReverted("settle()", "WrongStatus")
    agent._send = lost
    monkeypatch.setattr(embedded, "call", lambda *a, **k: None)  # the call passes; then another party's tx lands first
    with caplog.at_level(logging.DEBUG, logger="verde.agent"):
        assert agent._try("settle", v.registry.functions.settle(jid)) is False
    assert [r.levelno for r in caplog.records if "WrongStatus" in r.getMessage()] == [logging.DEBUG]
