"""AdamW steps of a plain torch.nn model under RepOps, for the model-family tests' bit checks
(threads, backends, the numpy spec): one loop, one bits view."""
import contextlib

import torch

import repops
from repops.models.quick_train import num_threads
from repops.optim import AdamW


def adamw_steps(model, batches, backend="cpu", threads=1, key: int | None = None, lr=1e-2):
    """model(*batch) is the loss; one AdamW step per batch on `backend` with `threads`. key:
    draws inside repops.dropout_key(key, s) at step s. -> (losses [steps], parameters flattened)."""
    opt = AdamW(model.parameters(), lr=lr)
    losses = []
    with num_threads(threads), repops.deterministic(backend):
        for s, batch in enumerate(batches):
            opt.zero_grad(set_to_none=True)
            with repops.dropout_key(key, s) if key is not None else contextlib.nullcontext():
                loss = model(*batch)
                loss.backward()
            opt.step()
            losses.append(loss.detach())
    return torch.stack(losses), torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def bits(t):
    return t.contiguous().view(torch.int32)

