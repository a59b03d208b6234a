"""Shared fixtures: compiled artifacts and one chain per backend per test worker."""
import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("SOLCX_BINARY_PATH", str(ROOT / ".venv" / "solcx"))


@pytest.fixture(scope="session")
def artifacts():
    from offchain.chain import compile_contracts
    return compile_contracts()


@pytest.fixture(scope="session")
def embedded(artifacts):
    from offchain.chain import connect
    with connect("embedded", artifacts) as chain:
        yield chain


@pytest.fixture(scope="session")
def anvil(artifacts):
    from offchain.chain import connect
    with connect("anvil", artifacts) as chain:
        yield chain


@pytest.fixture(params=["embedded", pytest.param("anvil", marks=pytest.mark.anvil)])
def chain(request):
    """Runs a test body once per local backend."""
    return request.getfixturevalue(request.param)


def pytest_collection_modifyitems(config, items):
    if shutil.which("node") is None:
        skip = pytest.mark.skip(reason="Node.js not on PATH: contracts cannot be compiled (run scripts/bootstrap.sh)")
        for item in items:
            if "chain" in item.fixturenames or "artifacts" in item.fixturenames:
                item.add_marker(skip)
