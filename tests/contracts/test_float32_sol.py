"""Float32.sol (through the Primitives table) vs the Python soft-float, bit for bit."""
import numpy as np
import pytest

from offchain.chain import harness
from offchain.softfloat import float32 as sf
from offchain.softfloat import check as chk

PER_OP = {"embedded": 300, "anvil": 20_000}
CHUNK = 4000


@pytest.fixture(scope="module")
def harnesses():
    return {}


@pytest.mark.parametrize("name", sorted(sf.PRIMITIVES))
def test_solidity_matches_python_softfloat(chain, harnesses, name):
    h = harnesses.get(chain.backend) or harnesses.setdefault(chain.backend, chain.deploy("Float32Harness"))
    n = PER_OP[chain.backend]
    rng = np.random.default_rng(1000 + sorted(sf.PRIMITIVES).index(name))
    # Anvil: every edge combination + n random; py-evm (~1 M gas/s): n random only
    a, b, c = chk.operands(name, n, rng, edges=chain.backend == "anvil")
    want = chk.softfloat_results(name, a, b, c)
    got = np.concatenate([harness.run(chain, h, sf.PRIMITIVES[name][0], a[i:i + CHUNK], b[i:i + CHUNK],
                                      c[i:i + CHUNK])[0] for i in range(0, len(a), CHUNK)])
    bad = got != want
    assert len(got) >= (n if chain.backend == "embedded" else 20_000)
    assert not bad.any(), f"{name}: {bad.sum()} mismatches, first " + ", ".join(
        f"({a[j]:#x},{b[j]:#x},{c[j]:#x}) sol {got[j]:#x} py {want[j]:#x}" for j in np.flatnonzero(bad)[:3])


def test_harness_rejects_mismatched_lengths(embedded):
    from offchain.chain import TransactionReverted
    h = embedded.deploy("Float32Harness")
    with pytest.raises(TransactionReverted) as e:
        embedded.call(h.functions.run(0, [1, 2], [1], [1, 2]))
    assert e.value.error == "LengthMismatch"
