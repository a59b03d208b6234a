"""Level 5 of a dropout mask on chain: Executor.truth on the Philox kernel of a recorded
repops.dropout node, with the operand proofs the chain client sends, against the spec's
element (level5_primitive.evaluate, the kernel's own output), at elements across the mask,
for keys whose words have the top bit set (negative int32) and a large step."""
import numpy as np
import pytest
import torch

import repops
from offchain.chain.verde import _proof_tuple
from offchain.dispute import level5_primitive as L5
from offchain.dispute.oprun import OpRun, operand_shape
from offchain.protocol.tensors import Committed, canonical
from offchain.protocol.trace import StepRecorder

CHUNK = 16


@pytest.fixture(scope="module")
def executor(embedded):
    return embedded.deploy("Executor")


def _philox_kernel(seed, step, p, shape):
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(seed & 0xFFFF))
    s = torch.tensor(float(step))
    rec = StepRecorder([x, s], [], chunk=CHUNK, keep=True)
    with repops.dropout_key(seed, s), repops.deterministic(trace=rec):
        torch.nn.functional.dropout(x, p)
    node = next(n for n in rec.nodes if n.op == "repops.dropout.default")
    run = OpRun(node.structure(), [x, s], CHUNK)
    k = next(i for i, kern in enumerate(run.kernels()) if kern.name == "philox")
    return run.kernels(keep=k)[k]


@pytest.mark.parametrize("seed,step,p,shape", [(11, 1, 0.25, (5, 9)), (-7, 2 ** 24 - 1, 0.5, (3, 70)),
                                               (0xDEADBEEF, 12345, 0.9, (40,))])
def test_executor_settles_a_mask_element_as_the_spec(executor, seed, step, p, shape):
    kern = _philox_kernel(seed, step, p, shape)
    shapes = [operand_shape(d) for d in kern.descriptors]
    n = int(np.prod(shape))
    rng = np.random.default_rng(0)
    for flat in {0, n - 1, *rng.integers(0, n, 6).tolist()}:
        proofs = []

        def fetch(o, idx):
            proof = Committed(canonical(kern.arrays[o]), CHUNK).element_proof(idx)
            proofs.append(_proof_tuple(proof))
            return proof.element(), proof.code
        want, words = L5.evaluate("philox", shapes, flat, fetch)
        assert want == int(kern.out_array.reshape(-1)[flat])
        got = executor.functions.truth(kern.structure(), flat, kern.operands, proofs).call()
        assert got == want, (flat, words)
    # a proof of another element of the threshold is not the one the output element reads
    bad = list(proofs)
    bad[3] = _proof_tuple(Committed(canonical(kern.arrays[3]), CHUNK).element_proof((flat + 1) % n))
    with pytest.raises(Exception, match="OperandNotProven|revert"):
        executor.functions.truth(kern.structure(), flat, kern.operands, bad).call()
    with pytest.raises(Exception, match="WrongProofCount|revert"):  # every one of the four words is proven
        executor.functions.truth(kern.structure(), flat, kern.operands, proofs[:3]).call()
