"""Result delivery: what the accepted trainer publishes is what the client gets, checked
against the accepted claim; a damaged or substituted store entry is refused, naming what
differs (issue #22). `verde fetch` writes exactly the committed tensors, under names that map
one to one onto the committed ones, and refuses without opening it anything in an entry that
is not a regular file of the store (issue #42)."""
import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess

import pytest
import torch
import torch.nn as nn
from safetensors.torch import load_file, save_file

from offchain.chain import ChainError
from offchain.protocol.dataset import TrainingState, initial_state, write_inference_job, write_program_job
from offchain.protocol.delivery import DeliveryError, MANIFEST, STATE, model_tensors, publish, verify
from offchain.protocol.jobfile import load
from offchain.trainer import Trainer


def test_the_published_result_verifies_and_loads_bit_for_bit(job, honest, tmp_path):
    entry = publish(honest, tmp_path / "store")
    assert entry.name == honest.final_claim().hex()
    state = verify(job, tmp_path / "store", honest.final_claim())
    final = honest.store.load(job.spec.steps)
    assert state.keys() == final.keys()
    for n in final:
        assert torch.equal(state[n].view(torch.int32), final[n].view(torch.int32)), n  # bits, not values
    model = initial_state(job).model
    model.load_state_dict(model_tensors(job, state), strict=True)  # what a client does with it
    assert publish(honest, tmp_path / "store") == entry  # idempotent


@pytest.mark.parametrize("damage,message", [
    ("flip", "does not match its commitment"),
    ("truncate", "is damaged"),
    ("manifest-commitment", "do not hash to the accepted claim"),
    ("manifest-names", "not this job's state"),
    ("missing", "no result"),
])
def test_a_damaged_or_substituted_entry_is_refused(job, honest, tmp_path, damage, message):
    store = tmp_path / "store"
    entry = publish(honest, store)
    claim = honest.final_claim()
    if damage == "flip":
        from safetensors.torch import load_file, save_file
        t = load_file(str(entry / STATE))
        name = next(iter(t))
        t[name] = t[name].clone()
        t[name].view(-1)[0] = torch.nextafter(t[name].view(-1)[0], torch.tensor(1e9))  # one ulp, one element
        save_file(t, str(entry / STATE))
    elif damage == "truncate":
        data = (entry / STATE).read_bytes()
        (entry / STATE).write_bytes(data[:-64])
    elif damage.startswith("manifest"):
        m = json.loads((entry / MANIFEST).read_text())
        if damage == "manifest-commitment":
            m["commitments"][0] = "00" * 32
        else:
            m["names"] = m["names"][::-1]
        (entry / MANIFEST).write_text(json.dumps(m))
    else:
        claim = bytes(32)
    with pytest.raises(DeliveryError, match=message):
        verify(job, store, claim)


def _rewrite_state(entry, change):
    t = load_file(str(entry / STATE))
    change(t)
    save_file(t, str(entry / STATE))


@pytest.mark.parametrize("change,named", [
    (lambda t: t.update(injected=torch.zeros(3)), "missing [], not committed ['injected']"),
    (lambda t: t.pop("fc1.bias"), "missing ['fc1.bias'], not committed []"),
    (lambda t: t.update({"fc1.bias ": t.pop("fc1.bias")}), "missing ['fc1.bias'], not committed ['fc1.bias ']"),
], ids=["extra", "missing", "renamed"])
def test_an_entry_holding_other_tensors_than_the_committed_ones_is_refused_naming_them(job, honest, tmp_path, change,
                                                                                        named):
    store = tmp_path / "store"
    _rewrite_state(publish(honest, store), change)
    with pytest.raises(DeliveryError, match=re.escape(f"does not hold exactly the committed tensors: {named}")):
        verify(job, store, honest.final_claim())


@contextlib.contextmanager
def _released(fifo, mark, after=15):
    """A reader still blocked on `fifo` after `after` seconds is let go by another process that
    opens it for writing and then writes `mark`: a regression fails instead of hanging (a
    thread could not do it: the blocked reader may hold the GIL)."""
    p = subprocess.Popen(["sh", "-c", 'sleep "$1" && : > "$2" && : > "$3"', "sh", str(after), str(fifo), str(mark)],
                         start_new_session=True)
    try:
        yield
    finally:
        os.killpg(p.pid, signal.SIGKILL)  # sh and its sleep (or its open, waiting for a reader)
        p.wait()


@pytest.mark.parametrize("name", [STATE, MANIFEST])
def test_a_fifo_in_an_entry_is_refused_without_blocking(job, honest, tmp_path, name):
    store = tmp_path / "store"
    entry = publish(honest, store)
    (entry / name).unlink()
    os.mkfifo(entry / name)
    with _released(entry / name, tmp_path / "released"):
        with pytest.raises(DeliveryError, match=f"{re.escape(name)} is a FIFO .*, not a regular file: refused unread"):
            verify(job, store, honest.final_claim())
    assert not (tmp_path / "released").exists(), "reading the store blocked on a FIFO"


@pytest.mark.parametrize("kind", ["directory", "socket"])
def test_an_entry_file_that_is_not_a_regular_file_is_refused_naming_what_it_is(job, honest, tmp_path, monkeypatch,
                                                                                kind):
    store = tmp_path / "store"
    entry = publish(honest, store)
    (entry / STATE).unlink()
    if kind == "directory":
        (entry / STATE).mkdir()
    else:
        monkeypatch.chdir(entry)  # (a socket's path must be short)
        with socket.socket(socket.AF_UNIX) as s:
            s.bind(STATE)  # (its file stays)
        monkeypatch.chdir(tmp_path)
    with pytest.raises(DeliveryError, match=f"{re.escape(STATE)} is a {kind}, not a regular file"):
        verify(job, store, honest.final_claim())


@pytest.mark.parametrize("what", ["file", "entry"])
def test_a_link_out_of_the_store_is_refused_even_to_the_right_bytes(job, honest, tmp_path, what):
    store, elsewhere = tmp_path / "store", tmp_path / "elsewhere"
    entry = publish(honest, store)
    moved = entry / STATE if what == "file" else entry
    shutil.move(moved, elsewhere)
    moved.symlink_to(elsewhere)
    with pytest.raises(DeliveryError, match="leads out of the store"):
        verify(job, store, honest.final_claim())


def test_a_link_inside_the_store_is_followed(job, honest, tmp_path):
    store = tmp_path / "store"
    entry = publish(honest, store)
    (store / "blobs").mkdir()
    shutil.move(entry / STATE, store / "blobs" / "state")
    (entry / STATE).symlink_to(os.path.join("..", "blobs", "state"))
    assert list(verify(job, store, honest.final_claim())) == initial_state(job).names()


# -- the model's names: one to one onto the committed ones --

class Named(nn.Module):
    """Submodules called `buffer` and `opt`: the prefixes of the state's other names."""

    def __init__(self):
        super().__init__()
        self.buffer = nn.Linear(4, 4)
        self.weight = nn.Parameter(torch.randn(4, 4))
        self.opt = nn.Linear(4, 3)

    def forward(self, x, y):
        return nn.functional.cross_entropy(self.opt(self.buffer(x) @ self.weight), y)


@pytest.fixture(scope="module")
def named(tmp_path_factory):
    d = tmp_path_factory.mktemp("named")
    torch.manual_seed(0)
    data = {"x": torch.randn(8, 4), "y": torch.randint(0, 3, (8,))}
    job = load(write_program_job(d / "job", Named(), data, ["x", "y"], steps=2, batch_size=4, fanout=2, chunk=8))
    t = Trainer(job, d / "t", "t")
    t.train()
    return job, t


def test_a_models_own_names_survive_delivery_whatever_they_start_with(named, tmp_path):
    job, trainer = named
    state = verify(job, publish(trainer, tmp_path / "store").parent, trainer.final_claim())
    model = model_tensors(job, state)
    assert sorted(model) == sorted(Named().state_dict())
    Named().load_state_dict(model, strict=True)  # the client's own module takes them
    final = trainer.store.load(job.spec.steps)
    assert all(torch.equal(model[n], final[n]) for n in model)


def test_a_name_mapping_that_is_not_one_to_one_or_an_uncommitted_name_is_refused(job, honest, tmp_path, monkeypatch):
    state = verify(job, publish(honest, tmp_path / "store").parent, honest.final_claim())
    with pytest.raises(DeliveryError, match=re.escape("not committed ['outputs']")):
        model_tensors(job, {**state, "outputs": torch.zeros(1)})
    pairs = TrainingState.model_names  # a mapping by last name: fc1.weight and norm.weight both `weight`
    monkeypatch.setattr(TrainingState, "model_names", lambda st: [(n, m.split(".")[-1]) for n, m in pairs(st)])
    with pytest.raises(DeliveryError, match="state tensors fc1.weight and norm.weight would both be written as"):
        model_tensors(job, state)


# -- an inference job's outputs, through `verde fetch` --

@pytest.fixture(scope="module")
def inference(tmp_path_factory):
    d = tmp_path_factory.mktemp("inference")
    torch.manual_seed(0)
    job_file = write_inference_job(d / "job", nn.Linear(4, 3), {"x": torch.randn(8, 4)}, ["x"], batch_size=4,
                                   fanout=2, chunk=8)
    job = load(job_file)
    t = Trainer(job, d / "t", "t")
    t.train()
    return job_file, job, t


def _fetch(job_file, job, trainer, store, out, monkeypatch, capsys):
    """`verde fetch 1 JOB --from STORE --out OUT` against a registry that accepted the trainer's claim."""
    from offchain.cli import client

    class Registry:
        def status(self, jid):  # (.., status settled, accepted claim, terms (job id, ..), accepted trainers)
            return None, None, 3, trainer.final_claim(), (job.job_id,), []

        def accepted_fault(self, jid):  # a result claim was accepted, not a fault
            return None
    monkeypatch.setattr(client, "verde_of", lambda args: (contextlib.nullcontext(), Registry()))
    client.cmd_fetch(argparse.Namespace(job=str(job_file), job_id=1, store=store, out=str(out), with_optimizer=False))
    return " ".join(capsys.readouterr().out.split())


def test_fetch_writes_an_inference_jobs_committed_outputs_and_counts_them(inference, tmp_path, monkeypatch, capsys):
    job_file, job, trainer = inference
    store, out = publish(trainer, tmp_path / "store").parent, tmp_path / "model.safetensors"
    said = _fetch(job_file, job, trainer, store, out, monkeypatch, capsys)
    assert "checked (3 tensors, every chunk against its commitment); wrote 3 tensors" in said, said
    got, final = load_file(str(out)), trainer.store.load(job.spec.steps)
    assert sorted(got) == ["bias", "outputs", "weight"]  # the client's module's own keys, and the outputs
    assert torch.equal(got["outputs"].view(torch.int32), final["buffer.outputs"].view(torch.int32))
    nn.Linear(4, 3).load_state_dict({k: v for k, v in got.items() if k != "outputs"}, strict=True)


def test_fetch_refuses_a_tensor_outputs_beside_the_committed_buffer_outputs(inference, tmp_path, monkeypatch, capsys):
    """The red team's substitution: `outputs` is what the model file calls the committed
    `buffer.outputs`; an entry that adds a tensor by that name must not reach the file."""
    job_file, job, trainer = inference
    store, out = tmp_path / "store", tmp_path / "model.safetensors"
    _rewrite_state(publish(trainer, store), lambda t: t.update(outputs=torch.full((8, 3), 7.0)))
    with pytest.raises(ChainError, match=re.escape("missing [], not committed ['outputs']")):
        _fetch(job_file, job, trainer, store, out, monkeypatch, capsys)
    assert not out.exists()
