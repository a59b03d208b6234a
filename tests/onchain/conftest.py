"""The on-chain tests' job: the protocol tests' small MLP job and an honest trainer of it,
trained once per test process."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "protocol"))
from playing import trained  # noqa: E402
from small_job import write_small_job  # noqa: E402  (the protocol tests' job)


@pytest.fixture(scope="session")
def setup(tmp_path_factory):
    """-> (job, its referee context, the honest trainer, a directory for more trainers)."""
    d = tmp_path_factory.mktemp("onchain")
    return (*trained(write_small_job(d / "job"), d), d)
