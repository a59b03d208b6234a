"""Job files (validation that names the field), the batch schedule, the trace recorder
(graph from meta tensors == recorded graph), and checkpoints that survive a crash."""
import json
import os

import pytest
import torch
import yaml

import repops
from offchain.trainer import adversaries as A
from offchain.protocol.step import graph_of
from offchain.protocol.dataset import write_job
from offchain.protocol.job import JobError, parse
from offchain.protocol.jobfile import load
from offchain.protocol.schedule import batch_rows
from offchain.protocol.trace import StepRecorder, TraceError
from offchain.trainer import Trainer
from offchain.trainer.store import CheckpointStore

from small_job import mlp_data


def edit(job_file, tmp_path, change):
    spec = yaml.safe_load(job_file.read_text())
    change(spec)
    p = job_file.parent / f"edited-{os.getpid()}-{tmp_path.name}.yaml"
    p.write_text(yaml.safe_dump(spec))
    return p


@pytest.mark.parametrize("change,message", [
    (lambda s: s.pop("steps"), r"steps: Field required"),
    (lambda s: s.update(steps=0), r"steps: Input should be greater than 0"),
    (lambda s: s.update(fanout=1), r"fanout: Input should be greater than or equal to 2"),
    (lambda s: s["data"].update(batch_size=-3), r"data.batch_size"),
    (lambda s: s.update(colour="red"), r"colour: Extra inputs are not permitted"),
    (lambda s: s["model"].update(name="gpt5"), r"model.name"),
    (lambda s: s["model"]["config"].update(depth=3), r"unknown mlp config field\(s\) \['depth'\]"),
    (lambda s: s["optimizer"].update(betas=[0.9, 1.5]), r"betas must lie in \[0, 1\)"),
    (lambda s: s["init"].update(sha256="ab" * 32), r"init.file 'init.safetensors' has SHA-256"),
    (lambda s: s["data"].update(file="missing.safetensors"), r"data.file 'missing.safetensors' does not exist"),
    (lambda s: s["model"]["config"].update(d_in=17), r"data.x must be float32 \[n, 17\]"),
])
def test_a_bad_job_file_names_the_field(job_file, tmp_path, change, message):
    with pytest.raises(JobError, match=message):
        load(edit(job_file, tmp_path, change))


def test_a_model_with_a_state_tensor_without_elements_is_refused_at_load(tmp_path):
    """No delivery challenge on it could be answered (docs/PROTOCOL.md §6); program jobs: test_program_jobs."""
    job_file = write_job(tmp_path, "mlp", {"d_in": 16, "d_hidden": 0, "n_classes": 10}, mlp_data(), steps=2,
                         batch_size=8)
    with pytest.raises(JobError, match=r"state tensor 'fc1.weight' has shape \[0, 16\], no elements"):
        load(job_file)


def test_malformed_yaml_and_wrong_top_level_are_clear(tmp_path):
    with pytest.raises(JobError, match="not valid YAML"):
        parse("model: [unclosed")
    with pytest.raises(JobError, match="must be a mapping"):
        parse("- 1\n- 2")
    with pytest.raises(JobError, match="cannot read the job file"):
        load(tmp_path / "nope.yaml")


def test_job_id_ignores_paths_and_binds_everything_else(job_file, tmp_path):
    job = load(job_file)
    moved = tmp_path / "elsewhere"
    moved.mkdir()
    for f in ("init.safetensors", "data.safetensors"):
        (moved / ("copy-" + f)).write_bytes((job_file.parent / f).read_bytes())
    spec = yaml.safe_load(job_file.read_text())
    spec["init"]["file"], spec["data"]["file"] = "copy-init.safetensors", "copy-data.safetensors"
    (moved / "job.yaml").write_text(yaml.safe_dump(spec))
    assert load(moved / "job.yaml").job_id == job.job_id
    spec["optimizer"]["lr"] *= 2
    (moved / "job.yaml").write_text(yaml.safe_dump(spec))
    assert load(moved / "job.yaml").job_id != job.job_id


def test_schedule_is_a_permutation_per_epoch_and_reproducible():
    n, b = 10, 4
    rows = [r for t in range(5) for r in batch_rows(n, b, 7, t)]
    assert sorted(rows[:10]) == list(range(10)) and sorted(rows[10:20]) == list(range(10))
    assert rows == [r for t in range(5) for r in batch_rows(n, b, 7, t)]
    assert rows != [r for t in range(5) for r in batch_rows(n, b, 8, t)]


@pytest.mark.parametrize("model,config,data", [
    ("mlp", {"d_in": 16, "d_hidden": 32, "n_classes": 10}, mlp_data()),
    ("llama", {"vocab": 64, "d_model": 32, "n_layers": 1, "n_heads": 2, "d_ff": 64, "max_seq": 16},
     {"tokens": torch.randint(0, 64, (20, 17), generator=torch.Generator().manual_seed(0))}),
])
def test_graph_from_meta_tensors_equals_the_recorded_graph(tmp_path, model, config, data):
    job = load(write_job(tmp_path, model, config, data, steps=2, batch_size=4))
    g = graph_of(job)
    t = Trainer(job, tmp_path / "t", "t")
    for s in (0, 1):
        tr = t.step_trace(s)
        assert [n.structure() for n in tr.nodes] == g.structures
        assert tr.state_refs == g.state_refs


def test_a_read_through_a_rewritten_alias_is_refused():
    x = torch.randn(4, 4)
    rec = StepRecorder([x], [], chunk=8)
    with pytest.raises(TraceError, match="rewrote"):
        with repops.deterministic(trace=rec):
            v = x.t()          # a view, produced now
            x.mul_(2.0)        # the base is rewritten in place
            v + 1.0            # the old view is read: its producer is ambiguous


def test_a_tensor_from_outside_the_step_is_refused():
    outside = torch.randn(3)
    rec = StepRecorder([], [], chunk=8)
    with pytest.raises(TraceError, match="neither the output of an op"):
        with repops.deterministic(trace=rec):
            outside * 2.0


def test_a_crash_mid_training_resumes_to_the_same_claim(job, honest, tmp_path):
    class Crash(A.Honest):
        def skips(self, step):
            if step == 4:
                raise KeyboardInterrupt("killed")
            return False
    t = Trainer(job, tmp_path / "c", "c", behaviour=Crash())
    with pytest.raises(KeyboardInterrupt):
        t.train()
    (tmp_path / "c" / "ckpt-00000006.safetensors.tmp123").write_bytes(b"half a file")  # a torn write
    resumed = Trainer(job, tmp_path / "c", "c")
    assert resumed.store.steps() == [2, 4]   # the torn file is gone, the complete ones stay
    assert resumed.train() == honest.final_claim()


def test_a_damaged_checkpoint_is_moved_aside_and_the_claim_is_the_same(job, honest, tmp_path):
    """Issue #22: a truncated checkpoint used to stop the trainer with a bare SafetensorError.
    It is moved aside (*.corrupt, kept for a look) and training resumes from the one before:
    the same final claim, and every answer from it is the same."""
    t = Trainer(job, tmp_path / "d", "d")
    t.train()
    last = t.store.steps()[-1]
    bad = tmp_path / "d" / f"ckpt-{last:08d}.safetensors"
    bad.write_bytes(bad.read_bytes()[:-100])
    resumed = Trainer(job, tmp_path / "d", "d")
    assert resumed.train() == honest.final_claim()
    assert (tmp_path / "d" / f"{bad.name}.corrupt").exists()
    assert resumed.store.steps()[-1] == last  # rewritten by the re-run
    assert resumed.open_claim(last) == honest.open_claim(last)


def test_checkpoint_store_writes_atomically(tmp_path):
    s = CheckpointStore(tmp_path)
    s.save(3, {"w": torch.ones(2)})
    s.save_claims({3: b"\x01" * 32})
    assert s.steps() == [3] and torch.equal(s.load(3)["w"], torch.ones(2))
    assert json.loads((tmp_path / "claims.json").read_text()) == {"3": "01" * 32}
    assert not list(tmp_path.glob("*.tmp*"))
