"""A small MLP job, its referee context and an honest trainer, shared by the protocol tests."""
import pytest

from offchain.dispute.context import Context
from offchain.protocol.jobfile import load
from offchain.trainer import Trainer
from small_job import write_small_job


@pytest.fixture(scope="session")
def job_file(tmp_path_factory):
    return write_small_job(tmp_path_factory.mktemp("job"))


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
