"""A small MLP job, its referee context and an honest trainer, shared by the protocol tests."""
import pytest
import torch

from offchain.dispute.context import Context
from offchain.protocol.dataset import write_job
from offchain.protocol.job import load
from offchain.trainer import Trainer

STEPS, FANOUT = 6, 3


def mlp_data(n=64, d=16, classes=10, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g)
    return {"x": x, "y": (x @ torch.randn(d, classes, generator=g)).argmax(1)}


@pytest.fixture(scope="session")
def job_file(tmp_path_factory):
    d = tmp_path_factory.mktemp("job")
    return write_job(d, "mlp", {"d_in": 16, "d_hidden": 32, "n_classes": 10}, mlp_data(), steps=STEPS,
                     batch_size=8, fanout=FANOUT, chunk=64)


@pytest.fixture(scope="session")
def job(job_file):
    return load(job_file)


@pytest.fixture(scope="session")
def ctx(job):
    return Context(job)


@pytest.fixture(scope="session")
def honest(job, tmp_path_factory):
    t = Trainer(job, tmp_path_factory.mktemp("honest"), "honest")
    t.train()
    return t
