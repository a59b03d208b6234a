"""Inference jobs (offchain/protocol/program.export_inference): a frozen model run on every row
of the data once, in order; each step rolls its batch's outputs into the state, so the state
root commits to them and the client receives them as it receives a trained model. The
outputs are the user's module's own under RepOps, bit for bit; a cheater at one batch's
outputs loses at the primitive, off chain and on chain; a malformed job is a JobError."""
import sys
from pathlib import Path

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
import yaml

import repops
from offchain.chain.verde import Verde
from offchain.dispute.context import Context
from offchain.protocol.dataset import write_inference_job, write_program_job
from offchain.protocol.job import JobError
from offchain.protocol.jobfile import load
from offchain.protocol.trace import decode_structure
from offchain.trainer import Trainer
from offchain.trainer import adversaries as A

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "repops"))
from model_zoo import MODELS  # noqa: E402
from playing import honest_wins_off_chain, off_chain  # noqa: E402

PAY, STAKE = 3 * 10**18, 10**18


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.head = nn.Linear(4, 3)

    def forward(self, images):
        h = F.max_pool2d(F.relu(self.bn(self.conv(images))), 2)
        return self.head(F.adaptive_avg_pool2d(h, 1).flatten(1))


class Logits(nn.Module):
    """A Hugging Face model's logits: the tensor an inference program returns."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, ids):
        return self.model(input_ids=ids).logits


def _classifier():
    torch.manual_seed(0)
    m = Classifier()
    with torch.no_grad():  # running statistics that are not the defaults
        m.bn.running_mean.uniform_(-0.5, 0.5)
        m.bn.running_var.uniform_(0.5, 2.0)
    return m, {"images": torch.randn(12, 2, 6, 6, generator=torch.Generator().manual_seed(1))}


@pytest.fixture(scope="module")
def classify(tmp_path_factory):
    d = tmp_path_factory.mktemp("inference")
    model, data = _classifier()
    job = load(write_inference_job(d / "job", model, data, ["images"], batch_size=4, fanout=2))
    honest = Trainer(job, d / "honest", "honest")
    honest.train()
    return job, Context(job), honest, model, data, d


def _eager(model, data, batch_size):
    """The user's own module under RepOps, batch by batch: what the outputs must be."""
    model.eval()
    with torch.no_grad(), repops.deterministic():
        return torch.cat([model(*(t[i:i + batch_size] for t in data)) for i in range(0, len(data[0]), batch_size)])


def _outputs(trainer):
    return trainer.store.load(trainer.steps)["buffer.outputs"]


def test_the_outputs_are_the_users_modules_for_every_row_in_order(classify, tmp_path, monkeypatch):
    job, ctx, honest, model, data, _ = classify
    spec = job.spec
    assert spec.inference and spec.optimizer is None and spec.data.seed is None and spec.steps == 3
    got, want = _outputs(honest), _eager(model, [data["images"]], 4)
    assert got.shape == (12, 3) and torch.equal(got.view(torch.int32), want.view(torch.int32))
    state = honest.store.load(spec.steps)
    assert not any(n.startswith("opt.") for n in state), "no optimizer state"
    for n, t in state.items():  # the weights are read, never written
        if n != "buffer.outputs":
            i = _initial(job)[n]  # (batch norm's int64 counter too: the client's state_dict keeps it)
            assert t.dtype == i.dtype and torch.equal(t.view(torch.int32) if t.is_floating_point() else t,
                                                       i.view(torch.int32) if i.is_floating_point() else i), n
    monkeypatch.setenv("REPOPS_NUM_THREADS", "2")
    assert Trainer(job, tmp_path / "two", "two").train() == honest.final_claim()
    assert ctx.kernel_graph.unsettled == []
    assert len(ctx.graph.structures) == len(honest.step_trace(0).nodes)


def _initial(job):
    from offchain.protocol.dataset import initial_state
    return initial_state(job).state_dict()


def test_a_cheater_at_one_batchs_outputs_loses_at_that_batch_and_the_primitive(classify):
    job, ctx, honest, _, _, d = classify
    head = next(j for j, s in enumerate(ctx.graph.structures) if decode_structure(s)[0] == "aten.addmm.default")
    bad = Trainer(job, d / "cheater", "cheater", behaviour=A.CorruptValue(step=1, node=head, element=4, ulps=1 << 10))
    bad.train()
    assert not torch.equal(_outputs(bad), _outputs(honest))
    for v in honest_wins_off_chain(ctx, honest, bad):
        assert (v.level, v.step, v.node) == (5, 1, head), str(v)


def test_a_trainer_that_skips_a_batch_loses(classify):
    job, ctx, honest, _, _, d = classify
    lazy = Trainer(job, d / "lazy", "lazy", behaviour=A.Lazy(start=2))
    lazy.train()
    v = off_chain(ctx, lazy, honest)
    assert v.winner == "honest" and v.losers == ["lazy"] and v.step == 2, str(v)


def test_on_chain_the_honest_inference_trainer_is_paid_and_the_cheater_slashed(embedded, classify):
    job, ctx, honest, _, _, d = classify
    cat = next(j for j, s in enumerate(ctx.graph.structures) if decode_structure(s)[0] == "aten.cat.default")
    bad = Trainer(job, d / "cat-cheat", "cheater", behaviour=A.CorruptValue(step=2, node=cat, element=7))
    bad.train()
    v = Verde.deploy(embedded)
    client, hon, cheat = embedded.accounts[1], embedded.accounts[2], embedded.accounts[3]
    seats = [(cheat, bad), (hon, honest)]
    jid, _ = v.deliver(job, ctx, seats, PAY, STAKE, client)
    (decided,) = v.settle_disputes(jid, seats, ctx)
    assert decided["winner"] == hon.address and decided["loser"] == cheat.address, decided
    assert v.owed(hon.address) == PAY + 2 * STAKE and v.owed(cheat.address) == 0


def test_a_hugging_face_models_logits_as_a_job(tmp_path):
    model, make, _ = MODELS["hf-gpt2"]()
    ids = torch.cat([make(0)[0], make(1)[0]])
    b = make(0)[0].shape[0]
    job = load(write_inference_job(tmp_path / "job", Logits(model), {"ids": ids}, ["ids"], batch_size=b))
    t = Trainer(job, tmp_path / "t", "t")
    t.train()
    got, want = _outputs(t), _eager(Logits(model), [ids], b)
    assert torch.equal(got.view(torch.int32), want.view(torch.int32))
    assert Context(job).kernel_graph.unsettled == []


def test_a_malformed_inference_job_is_a_job_error(tmp_path):
    model, data = _classifier()
    with pytest.raises(JobError, match="not a whole number of batches of 5"):
        write_inference_job(tmp_path / "a", model, data, ["images"], batch_size=5)

    class Pair(Classifier):
        def forward(self, images):
            return super().forward(images), images
    with pytest.raises(JobError, match="must return one tensor with the batch's 4 rows first, got tuple"):
        write_inference_job(tmp_path / "b", Pair(), data, ["images"], batch_size=4)

    good = write_inference_job(tmp_path / "c", model, data, ["images"], batch_size=4)
    spec = yaml.safe_load(good.read_text())
    for change, message in ((dict(steps=2), "steps 2 x batch_size 4 must equal the data's 12 rows"),
                            (dict(optimizer=dict(lr=1e-3)), r"no optimizer, seed or micro-batches; remove \['optimizer'\]"),
                            (dict(data={**spec["data"], "seed": 3}), r"remove \['data.seed'\]")):
        good.write_text(yaml.safe_dump({**spec, **change}))
        with pytest.raises(JobError, match=message):
            load(good)

    class WithLabels(Classifier):  # a training program posted as an inference job
        def forward(self, images):
            return F.cross_entropy(super().forward(images), torch.zeros(images.shape[0], dtype=torch.long))
    train = write_program_job(tmp_path / "d", WithLabels(), data, ["images"], steps=3, batch_size=4)
    spec = yaml.safe_load(train.read_text())
    spec.pop("optimizer")
    spec["data"].pop("seed")
    train.write_text(yaml.safe_dump({**spec, "kind": "inference"}))
    with pytest.raises(JobError, match="not an inference program for 12 rows"):
        load(train)


def test_verde_train_runs_an_inference_job_and_writes_its_outputs(classify, tmp_path):
    import os
    import subprocess
    from safetensors.torch import load_file
    job, _, honest, _, _, d = classify
    root = Path(__file__).resolve().parents[2]
    out = tmp_path / "outputs.safetensors"
    r = subprocess.run([sys.executable, "-m", "offchain.cli", "train", str(d / "job" / "job.yaml"), "--out", str(out)],
                       cwd=root, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(root), "COLUMNS": "300"}, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "outputs float32 [12, 3] (tensor 'outputs')" in r.stdout and honest.final_claim().hex() in r.stdout
    got = load_file(str(out))
    assert torch.equal(got["outputs"].view(torch.int32), _outputs(honest).view(torch.int32))


def test_the_examples_train_a_classifier_then_run_it_as_an_inference_job(tmp_path):
    """examples/cnn then examples/inference on the trained weights, as README.md shows them:
    the outputs `verde train --out` writes are the trained classifier's logits under RepOps."""
    import importlib.util
    import os
    import subprocess
    from safetensors.torch import load_file
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root), "COLUMNS": "300"}

    def run(*args):
        r = subprocess.run([sys.executable, *map(str, args)], cwd=root, capture_output=True, text=True, env=env,
                           timeout=600)
        assert r.returncode == 0, r.stdout + r.stderr
    run("examples/cnn/make_job.py", tmp_path / "cnn", "--steps", 2)
    run("-m", "offchain.cli", "train", tmp_path / "cnn" / "job.yaml", "--out", tmp_path / "trained.safetensors")
    run("examples/inference/make_job.py", tmp_path / "inf", "--weights", tmp_path / "trained.safetensors")
    run("-m", "offchain.cli", "train", tmp_path / "inf" / "job.yaml", "--out", tmp_path / "outputs.safetensors")
    spec = importlib.util.spec_from_file_location("inference_example", root / "examples" / "inference" / "make_job.py")
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    model = example.cnn.SmallCNN(10)
    example.load_weights(model, str(tmp_path / "trained.safetensors"))
    images = load_file(str(tmp_path / "inf" / "data.safetensors"))["images"]
    want = _eager(example.Predict(model), [images], 8)
    got = load_file(str(tmp_path / "outputs.safetensors"))["outputs"]
    assert got.shape == (64, 10) and torch.equal(got.view(torch.int32), want.view(torch.int32))
    fresh = example.cnn.SmallCNN(10).state_dict()
    assert not torch.equal(model.state_dict()["head.weight"], fresh["head.weight"]), "the trained weights were used"
