"""Disputes between trainers that train on the GPU: the honest one wins against every
adversary, in both seats, at the adversary's level. Levels 3-5 answer from a node's inputs
(device tensors) and every cheater tampers with device memory: paths the CPU disputes never
take (a cheater's numpy write to a CUDA tensor failed at the 350m scale run).

The program jobs are built with the pinned torch: on the lent GPU machines (torch 2.11, whose
torch.export cannot write our programs) scripts/gpu-wheels.sh builds them beforehand into
VERDE_EXAMPLE_JOBS, as for tests/cuda/test_examples_gpu.py."""
import dataclasses
import os
import sys
from pathlib import Path

import pytest

from kernel_samples import backend_table  # (tests/repops: see conftest.py)
from offchain.dispute.context import Context
from offchain.protocol.jobfile import load
from offchain.trainer import Trainer
from offchain.trainer import adversaries as A

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "protocol"))
from playing import honest_wins_off_chain, off_chain  # noqa: E402
from small_job import ADVERSARIES, write_small_job  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def mlp(tmp_path_factory):
    backend_table("cuda")  # skips without a device
    d = tmp_path_factory.mktemp("gpu-dispute")
    job = load(write_small_job(d / "job"))
    honest = Trainer(job, d / "honest", "honest", device="cuda")
    honest.train()
    return job, Context(job), honest


@pytest.mark.parametrize("behaviour", ADVERSARIES, ids=lambda b: f"{b.name}-{b.level}")
def test_the_honest_gpu_trainer_wins_against_every_adversary_in_both_seats(mlp, tmp_path, behaviour):
    job, ctx, honest = mlp
    bad = Trainer(job, tmp_path / "cheater", "cheater", device="cuda", behaviour=dataclasses.replace(behaviour))
    bad.train()
    for v in honest_wins_off_chain(ctx, honest, bad):
        assert v.level == behaviour.level if behaviour.name != "silent" else "no answer" in v.reason, str(v)


def test_a_gpu_cheater_on_attention_loses_to_a_cpu_trainer(tmp_path):
    """The scale benchmark's dispute, small: one attention element 64 ulps off on the GPU,
    played against the CPU's honest run (the same bits) down to one soft-float primitive."""
    backend_table("cuda")
    from offchain.protocol.corpus import token_rows
    from offchain.protocol.dataset import write_job
    from offchain.protocol.trace import decode_structure
    cfg = {"vocab": 256, "d_model": 32, "n_layers": 1, "n_heads": 2, "d_ff": 64, "max_seq": 16}
    job = load(write_job(tmp_path / "job", "llama", cfg, {"tokens": token_rows(16, rows=32)}, steps=2,
                         batch_size=4, fanout=2, chunk=128))
    ctx = Context(job)
    node = [decode_structure(s)[0] for s in ctx.graph.structures].index("repops.attention.default")
    honest = Trainer(job, tmp_path / "h", "honest")
    honest.train()
    bad = Trainer(job, tmp_path / "b", "cheater", device="cuda",
                  behaviour=A.CorruptValue(step=1, node=node, element=3, ulps=64))
    bad.train()
    v = off_chain(ctx, bad, honest)
    assert v.winner == "honest" and v.level == 5 and v.node == node, str(v)


# program jobs (a client's own model): a mask flipped in the Philox kernel of dropout, and one
# row's token count off by one in an integer kernel; (writer, op, KernelCheat's arguments, level)
PROGRAM_CHEATS = {
    "dropout-mask": ("write_dropout_job", "repops.dropout.default", dict(step=2, kernel=1, element=5), 5),
    "integer-count": ("write_integer_job", "aten.sum.dim_IntList", dict(step=2, from_end=2, element=1), 5),
}


@pytest.mark.parametrize("case", list(PROGRAM_CHEATS))
def test_the_honest_gpu_trainer_of_a_program_job_wins(tmp_path, case):
    import small_job
    backend_table("cuda")
    writer, op, cheat, level = PROGRAM_CHEATS[case]
    built = os.environ.get("VERDE_EXAMPLE_JOBS")
    job = load(Path(built) / writer / "job.yaml" if built else getattr(small_job, writer)(tmp_path / "job"))
    ctx = Context(job)
    from offchain.protocol.trace import decode_structure
    assert op in {decode_structure(s)[0] for s in ctx.graph.structures}, "the job must run the op cheated on"
    honest = Trainer(job, tmp_path / "h", "honest", device="cuda")
    honest.train()
    bad = Trainer(job, tmp_path / "b", "cheater", device="cuda", behaviour=A.KernelCheat(op=op, **cheat))
    bad.train()
    for v in honest_wins_off_chain(ctx, honest, bad):
        assert v.level == level, str(v)


if __name__ == "__main__":  # python tests/cuda/test_dispute_gpu.py DIR: build every program job into DIR/WRITER
    import small_job
    for w, *_ in PROGRAM_CHEATS.values():
        print(getattr(small_job, w)(Path(sys.argv[1]) / w))
