"""The arithmetic of one training step on a state and a batch (docs/PROTOCOL.md §5), apart
from the job: what a trainer runs (offchain/protocol/step.py traces it) and what writing a
program job runs once on the first batch (dataset.check_first_step). With M = 1 it is
torch.autograd.grad, each gradient assigned to p.grad; with M > 1 the mean of M micro-batch
gradients summed in the fixed tree (repops.distributed)."""
from __future__ import annotations

from typing import Callable

import torch

from repops.distributed.micro import assign, single_process_step


def run(st, batch: tuple, m: int = 1, loss_hook: Callable | None = None):
    """zero_grad, the gradient, the optimizer step (under repops.deterministic()); returns
    the loss tensor. An inference job's step is the program's forward alone (it writes the
    outputs into the state); it returns None."""
    if st.optimizer is None:
        with torch.no_grad():
            st.model.loss(*batch)
        return None
    st.optimizer.zero_grad(set_to_none=True)
    params = [p for p in st.model.parameters() if p.requires_grad]
    if m == 1:
        loss = st.model.loss(*batch)
        if loss_hook is not None:
            loss = loss_hook(loss)
        # autograd.grad, not backward(): AccumulateGrad would hand each gradient to p.grad
        # by detach or by new_empty_strided + copy_ depending on who else holds it (a
        # reference count), and the trace would record whichever it chose
        assign(params, torch.autograd.grad(loss, params, allow_unused=True))
    else:
        loss = single_process_step(st.model.loss, params, batch, m, loss_hook)
    st.optimizer.step()
    return loss
