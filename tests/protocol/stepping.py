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


def program_and_module(prog, module, batch):
    """[(loss, {name: grad}) of the loaded program, the same of the module it was exported from]:
    one backward of each under RepOps, for the program = module bit checks."""
    runs = []
    for m, loss_of in ((prog, prog.loss), (module, module)):
        with repops.deterministic():
            loss = loss_of(*batch)
            loss.backward()
        runs.append((loss.detach(), {k: p.grad for k, p in m.named_parameters(remove_duplicate=False)
                                     if p.grad is not None}))
    return runs


def bits(t):
    return t.contiguous().view(torch.int32)

