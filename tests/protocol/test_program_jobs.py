"""A client's own model as a job (offchain/protocol/program.py): a torch.export program whose
forward(*batch) returns the loss, with its weights and arrays. Every party loads it without
running the client's Python, trains it with the same bits, and the referee settles a
dispute over it down to one primitive; a bad file is a JobError before any money moves."""
import copy
import json
import re

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from offchain.dispute.context import Context
from offchain.protocol import dataset, program
from offchain.protocol.dataset import write_program_job
from offchain.protocol.job import JobError, sha256_file
from offchain.protocol.jobfile import load
from offchain.trainer import Trainer
from offchain.trainer import adversaries as A
from playing import honest_wins_off_chain


class TinyCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.head = nn.Linear(4, 3)

    def forward(self, images, labels):
        h = F.max_pool2d(F.relu(self.bn(self.conv(images))), 2)
        return F.cross_entropy(self.head(F.adaptive_avg_pool2d(h, 1).flatten(1)), labels)


def _data(n=12, side=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    return {"images": torch.randn(n, 2, side, side, generator=g), "labels": torch.randint(0, 3, (n,), generator=g)}


def _write(path, module=None, data=None, **kw):
    torch.manual_seed(0)
    return write_program_job(path, module or TinyCNN(), data or _data(), ["images", "labels"], steps=kw.pop("steps", 4),
                             batch_size=4, **kw)


@pytest.fixture(scope="module")
def program_job(tmp_path_factory):
    return load(_write(tmp_path_factory.mktemp("program") / "job"))


def test_the_job_is_the_program_its_weights_and_its_data(program_job, tmp_path):
    spec = program_job.spec
    assert spec.model.name == "program" and spec.data.keys == ["images", "labels"]
    again = load(_write(tmp_path / "again"))
    assert again.job_id == program_job.job_id, "exporting the same model and data again gives the same job"


def test_trainers_agree_on_every_claim_and_a_step_settles_on_chain(program_job, tmp_path, monkeypatch):
    monkeypatch.setenv("REPOPS_NUM_THREADS", "1")
    one = Trainer(program_job, tmp_path / "one", "one")
    c1 = one.train()
    monkeypatch.setenv("REPOPS_NUM_THREADS", "2")
    c2 = Trainer(program_job, tmp_path / "two", "two").train()
    assert c1 == c2
    ctx = Context(program_job)
    assert ctx.kernel_graph.unsettled == []
    assert len(ctx.graph.structures) == len(one.step_trace(0).nodes)


def test_a_program_parsed_once_a_process_loads_again_unchanged(program_job):
    """program.load keeps a file's parse (program._parsed): each load must leave it as it was
    and make a module of its own."""
    data = program_job.path(program_job.spec.model.program).read_bytes()
    init = dataset._load(program_job, program_job.spec.init, "init")
    parsed = program._parsed(data)
    before = copy.deepcopy(parsed)
    batch = [t[:4] for t in _data().values()]
    losses = []
    for _ in range(2):
        module = program.load(data, {k: v.clone() for k, v in init.items()})
        losses.append(module.loss(*batch).detach().view(torch.int32).item())
        with torch.no_grad():
            for p in module.parameters():
                p.add_(1.0)  # a step of this module's; the next load starts from init again
        assert losses[-1] != module.loss(*batch).detach().view(torch.int32).item()
    assert program._parsed(bytes(data)) is parsed and parsed == before
    assert losses[0] == losses[1]


def test_a_cheater_on_a_convolution_loses_at_the_primitive(program_job, tmp_path):
    from offchain.protocol.trace import decode_structure
    ctx = Context(program_job)
    conv = next(j for j, s in enumerate(ctx.graph.structures) if decode_structure(s)[0] == "aten.convolution.default")
    honest = Trainer(program_job, tmp_path / "honest", "honest")
    honest.train()
    bad = Trainer(program_job, tmp_path / "cheater", "cheater", behaviour=A.CorruptValue(step=1, node=conv, element=5, ulps=1 << 12))
    bad.train()
    for v in honest_wins_off_chain(ctx, honest, bad):
        assert v.level == 5 and v.node == conv, str(v)


def _rewrite(job_file, field, mutate):
    """Change one file of a job and re-seal its hash, as a careless or hostile client might."""
    import yaml
    spec = yaml.safe_load(job_file.read_text())
    ref = spec["model"]["program"] if field == "program" else spec[field]
    path = job_file.parent / ref["file"]
    mutate(path)
    ref["sha256"] = sha256_file(path)
    job_file.write_text(yaml.safe_dump(spec))


@pytest.mark.parametrize("target,match", [
    ("torch.ops.prims.neg.default", r"calls what is not an aten or RepOps operator: \['call_function prims.neg"),
    ("torch.load", "torch cannot rebuild the program: SpecViolationError: Operator .*load"),
])
def test_a_program_that_calls_anything_but_operators_is_refused(tmp_path, target, match):
    """An operator of another namespace passes torch's own check and is refused by ours; an
    arbitrary function is refused while torch rebuilds the graph, before anything runs."""
    job = _write(tmp_path / "j")

    def smuggle(path):
        text = path.read_text()
        assert "torch.ops.aten.relu.default" in text
        path.write_text(text.replace("torch.ops.aten.relu.default", target, 1))
    _rewrite(job, "program", smuggle)
    with pytest.raises(JobError, match=match):
        load(job)


@pytest.mark.parametrize("mutate,match", [
    (lambda p: p.write_text("{not json"), "not a torch.export program"),
    (lambda p: p.write_text(json.dumps({"graph_module": {}})), "not a torch.export program"),
])
def test_a_malformed_program_is_a_job_error(tmp_path, mutate, match):
    job = _write(tmp_path / "j")
    _rewrite(job, "program", mutate)
    with pytest.raises(JobError, match=match):
        load(job)


def test_a_changed_program_file_is_caught_by_its_hash(tmp_path):
    job = _write(tmp_path / "j")
    (job.parent / "model.json").write_text((job.parent / "model.json").read_text().replace("relu", "tanh"))
    with pytest.raises(JobError, match="model.program.*SHA-256"):
        load(job)


def test_data_that_does_not_fit_the_program_is_a_job_error(tmp_path):
    from safetensors.torch import save_file
    job = _write(tmp_path / "j")
    _rewrite(job, "data", lambda p: save_file(_data(side=7), str(p)))  # exported for 6x6 images
    with pytest.raises(JobError, match=r"data key 'images' has shape \[4, 2, 7, 7\] float32, the model expects "
                                       r"\[4, 2, 6, 6\] float32"):  # (was torch's "please re-export and specify dynamic_shapes")
        load(job)
    _rewrite(job, "data", lambda p: save_file({**_data(), "labels": _data()["labels"].to(torch.int32)}, str(p)))
    with pytest.raises(JobError, match=r"data key 'labels' has shape \[4\] int32, the model expects \[4\] int64"):
        load(job)
    _rewrite(job, "data", lambda p: save_file({"images": _data()["images"]}, str(p)))
    with pytest.raises(JobError, match=r"no tensors \['labels'\]"):
        load(job)


def test_weights_that_do_not_fit_are_a_job_error(tmp_path):
    from safetensors.torch import load_file, save_file
    job = _write(tmp_path / "j")

    def drop(p):
        w = load_file(str(p))
        w.pop("conv.weight")
        save_file(w, str(p))
    _rewrite(job, "init", drop)
    with pytest.raises(JobError, match=r"missing \['conv.weight'\]"):
        load(job)


class EmptyHead(TinyCNN):
    def __init__(self):
        super().__init__()
        self.spare = nn.Linear(4, 0)

    def forward(self, images, labels):
        return super().forward(images, labels) + self.spare(images[:, 0, 0, :4]).sum()


class EmptyBuffer(TinyCNN):
    def __init__(self):
        super().__init__()
        self.register_buffer("seen", torch.zeros(0))

    def forward(self, images, labels):
        return super().forward(torch.cat([images, self.seen.expand(*images.shape[:3], 0)], -1), labels)


@pytest.mark.parametrize("module,name,shape", [(EmptyHead, "spare.weight", "[0, 4]"),
                                               (EmptyBuffer, "buffer.seen", "[0]")])
def test_a_state_tensor_without_elements_is_refused_before_posting(tmp_path, module, name, shape):
    """A delivery challenge asks for a chunk of one state tensor and JobRegistry.answer proves
    one of its elements: on a tensor of 0 elements an honest accepted trainer could not answer."""
    with pytest.raises(JobError, match=re.escape(f"state tensor {name!r} has shape {shape}, no elements") +
                       ".*Drop the empty parameter or buffer from the model, or give it at least one element"):
        _write(tmp_path / "j", module())
    assert load(_write(tmp_path / "ok", TinyCNN())).spec.model.name == "program"  # without it, the job loads


def test_two_state_tensors_with_one_name_are_refused_before_posting(tmp_path):
    class Clash(TinyCNN):  # the parameter buffer.x and the buffer x: both state tensor `buffer.x`
        def __init__(self):
            super().__init__()
            self.buffer = nn.Module()
            self.buffer.x = nn.Parameter(torch.ones(3))
            self.register_buffer("x", torch.full((3,), 2.0))

        def forward(self, images, labels):
            return super().forward(images, labels) + (self.buffer.x * self.x).sum()
    with pytest.raises(JobError, match="two state tensors are named 'buffer.x'.*rename that submodule"):
        _write(tmp_path / "j", Clash())


def test_a_model_with_an_op_repops_lacks_is_refused_before_posting(tmp_path):
    class Cumulative(TinyCNN):
        def forward(self, images, labels):
            return super().forward(torch.igamma(images.abs() + 1, images.abs() + 1), labels)
    with pytest.raises(JobError, match=r"does not run under RepOps.*aten\.igamma"):
        _write(tmp_path / "j", Cumulative())


def test_npz_data_loads_without_pickles(tmp_path):
    job = _write(tmp_path / "j")
    d = _data()
    np.savez(job.parent / "data.npz", images=d["images"].numpy(), labels=d["labels"].numpy())
    import yaml
    spec = yaml.safe_load(job.read_text())
    spec["data"].update(file="data.npz", sha256=sha256_file(job.parent / "data.npz"))
    job.write_text(yaml.safe_dump(spec))
    from offchain.protocol.dataset import batch
    npz, original = load(job), load(_write(tmp_path / "original"))
    for a, b in zip(batch(npz, 1), batch(original, 1)):
        assert a.dtype == b.dtype and torch.equal(a.view(torch.uint8), b.view(torch.uint8))
    np.savez(job.parent / "data.npz", images=np.array([object()], dtype=object), labels=d["labels"].numpy())
    spec["data"]["sha256"] = sha256_file(job.parent / "data.npz")
    job.write_text(yaml.safe_dump(spec))
    with pytest.raises(JobError, match="no pickles"):
        load(job)
