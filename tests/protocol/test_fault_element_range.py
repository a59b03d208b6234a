"""A fault claimed at an element the faulting kernel does not have (red team): a fault node's
element is a free u64, so a cheater could name one past fault.bool's output. The honest
trainer's level-5 answer (and the off-chain referee) indexed the operand there and raised
(np.unravel_index), so on chain the honest agent could never send resolveStep and both clocks
ran: the one with less time left (the honest, which computes) lost its stake. An element the
kernel does not have does not fault: the claim is false, its party loses at level 5 (off chain
level5_primitive.evaluate, on chain Executor.truth: word 0 there)."""
import pytest

from offchain.trainer import Trainer
from offchain.trainer import adversaries as A
from playing import honest_paid_on_chain, honest_wins_off_chain

FAR = [2**40, 2**64 - 1]


@pytest.mark.parametrize("element", FAR)
def test_a_fault_claimed_past_the_kernels_output_loses_off_chain(job, ctx, honest, tmp_path, element):
    liar = Trainer(job, tmp_path / "far", "far-fault", behaviour=A.FalseFault(step=2, element=element))
    liar.train()
    for v in honest_wins_off_chain(ctx, honest, liar):
        assert v.level == 5 and "fault.bool" in v.reason, str(v)


def test_a_fault_claimed_past_the_kernels_output_loses_on_chain(settle_match, job, ctx, honest, tmp_path):
    liar = Trainer(job, tmp_path / "far", "far-fault", behaviour=A.FalseFault(step=2, element=FAR[0]))
    liar.train()
    honest_paid_on_chain(settle_match, job, ctx, liar, honest, level=5)
