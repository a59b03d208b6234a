"""The on-chain tests' job: the protocol tests' small MLP job and an honest trainer of it,
trained once per test process."""
import sys
from pathlib import Path

import pytest

from offchain.dispute.context import Context
from offchain.protocol.jobfile import load
from offchain.trainer import Trainer

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "protocol"))
from small_job import write_small_job  # noqa: E402  (the protocol tests' job)


@pytest.fixture(scope="session")
def setup(tmp_path_factory):
    """-> (job, its referee context, the honest trainer, a directory for more trainers)."""
    d = tmp_path_factory.mktemp("onchain")
    job = load(write_small_job(d / "job"))
    honest = Trainer(job, d / "honest", "honest")
    honest.train()
    return job, Context(job), honest, d
