"""forge's Solidity unit + fuzz tests (contracts/test), run from pytest so CI has one runner."""
import os
import re
import subprocess
from pathlib import Path

import pytest

from offchain.softfloat import check as softfloat_check

ROOT = Path(__file__).resolve().parents[2]
FORGE = ROOT / "node_modules" / "@foundry-rs" / "forge-linux-amd64" / "bin" / "forge"


def test_float32_vectors_file_is_current():
    """The committed vectors must be what the Python soft-float says today."""
    committed = (ROOT / "tests" / "vectors" / "float32.json").read_text()
    assert committed == softfloat_check.vectors_json(), (
        "tests/vectors/float32.json is stale: regenerate with "
        "`python -m offchain.softfloat.check > tests/vectors/float32.json`")


@pytest.mark.xdist_group("forge")
def test_forge_unit_and_fuzz_tests_pass():
    if not FORGE.exists():
        pytest.fail(f"forge not installed at {FORGE}: run scripts/bootstrap.sh")
    env = {**os.environ, "NO_COLOR": "1"}
    r = subprocess.run([str(FORGE), "test", "--root", str(ROOT)], capture_output=True, text=True, env=env, timeout=600)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-4000:]
    m = re.search(r"(\d+) tests passed, (\d+) failed", out)
    assert m and int(m.group(1)) >= 10 and m.group(2) == "0", out[-2000:]
