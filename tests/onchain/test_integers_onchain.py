"""The integer kernels on chain: Executor (Integers.sol) against the referee's Python
(offchain/softfloat/integers.py, itself tested against the numpy reference) on every op and
dtype at the edge values (wrap-around, INT_MIN / -1, division by 0, int64 -> binary32 ties),
and Executor.truth on the kernels of recorded integer ops (casts, comparisons, a masked fill,
an index of a bool mask by the gather kernel, a sum), with the operand proofs the chain
client sends, against level 5's evaluate and the kernel's own output."""
import itertools
import random

import numpy as np
import pytest
import torch

import repops
from offchain.chain.verde import _proof_tuple
from offchain.dispute import level5_primitive as L5
from offchain.dispute.oprun import OpRun, operand_shape
from offchain.protocol.tensors import Committed, canonical
from offchain.protocol.trace import StepRecorder
from offchain.softfloat import integers as si

CHUNK = 8
INT = 1000  # OneStep.INT
EDGES = {"i64": [0, 1, -1, 7, -7, 2 ** 62 + 5, 2 ** 63 - 1, -2 ** 63, 2 ** 53 + 3, -(2 ** 24) - 3],
         "i32": [0, 1, -1, 7, -7, 2 ** 31 - 1, -2 ** 31, 2 ** 24 + 3],
         "bool": [0, 1]}


@pytest.fixture(scope="module")
def executor(embedded):
    return embedded.deploy("Executor")


def _word(v: int, dt: str) -> int:
    return v & ((1 << si.WIDTH[dt]) - 1) if dt in si.WIDTH else v


def test_executor_computes_every_integer_kernel_as_the_referee(executor):
    rng = random.Random(0)
    checked = 0
    for i, op in enumerate(si.OPS[:-1]):  # gather is data movement: the recorded test below
        for dt, vs in EDGES.items():
            n = si.arity(op)
            combos = list(itertools.product(vs, repeat=n)) if n < 3 else \
                [(c, a, b) for c in (0, 1) for a, b in zip(vs, reversed(vs))]
            if (op, dt) in (("div_floor", "i64"), ("rem_trunc", "i64")):
                combos.append((-2 ** 63, -1))
            for combo in rng.sample(combos, min(len(combos), 12)):
                words = [_word(v, si.operand_dtype(op, dt, k)) for k, v in enumerate(combo)]
                want = si.apply(f"{op}.{dt}", words)
                got = executor.functions.exec(INT + 8 * i + si.CODES[dt], *(words + [0, 0])[:3]).call()
                assert got == want, (op, dt, combo)
                checked += 1
    assert checked > 500


def _recorded(fn, *inputs):
    rec = StepRecorder(list(inputs), [], chunk=CHUNK, keep=True)
    with repops.deterministic(trace=rec):
        fn(*inputs)
    for node in rec.nodes:
        ins = [rec.outputs[r.index][r.slot] if r.kind == 0 else inputs[r.index] for r in node.refs]
        run = OpRun(node.structure(), ins, CHUNK)
        for k, kern in enumerate(run.kernels()):
            if si.split(kern.name):
                yield run.kernels(keep=k)[k]


def _model(ids, mask):
    """What a model's forward computes from its batch: a label rule, a padding mask read
    through two index tensors, a masked fill, a count and a cast."""
    labels = (ids[:, 0] + 3) % 2
    m = mask.to(torch.bool)[torch.arange(2)[:, None, None], torch.arange(9)[None, None, :]]
    filled = ids.masked_fill(~mask.bool(), -100)
    return labels, m & (ids > 4)[:, None, :], filled, mask.sum(-1), (ids != 0).float()


def test_executor_settles_recorded_integer_kernels_as_level_5(executor):
    g = torch.Generator().manual_seed(3)
    ids = torch.randint(-2 ** 40, 2 ** 40, (2, 9), generator=g)
    ids[0, :3] = torch.tensor([0, 5, -2 ** 63])
    mask = torch.ones(2, 9, dtype=torch.int64)
    mask[1, 6:] = 0
    names, rng = set(), np.random.default_rng(0)
    for kern in _recorded(_model, ids, mask):
        names.add(kern.name)
        shapes = [operand_shape(d) for d in kern.descriptors]
        out = canonical(kern.out_array).reshape(-1)
        for flat in {0, out.size - 1, *rng.integers(0, out.size, 3).tolist()}:
            proofs = []

            def fetch(o, idx):
                proof = Committed(canonical(kern.arrays[o]), CHUNK).element_proof(idx)
                proofs.append(_proof_tuple(proof))
                return proof.element(), proof.code
            want, _ = L5.evaluate(kern.name, shapes, flat, fetch)
            assert want == int.from_bytes(out[flat:flat + 1].tobytes(), "little"), (kern.name, flat)
            structure = kern.structure()
            got = executor.functions.truth(structure, flat, kern.operands, proofs).call()
            assert got == want, (kern.name, flat)
    assert {"add.i64", "rem_floor.i64", "to_bool.i64", "gather.bool", "select.i64", "not.bool", "and.bool",
            "lt.i64", "to_f32.bool", "eq.i64"} <= names, names
