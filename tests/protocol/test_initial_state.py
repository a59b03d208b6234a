"""A fresh state skips torch's random fills of the parameters initial_state overwrites from the
job's init file (offchain/protocol/dataset.py _ParametersFromInit: half of a 125 M fresh state's
second, paid for every state a trainer re-derives): the state is bit for bit the one built with
the fills, whatever torch's RNG holds, and nothing but a Parameter's fill is skipped."""
import contextlib
import threading

import pytest
import torch

from offchain.protocol import dataset
from offchain.protocol.corpus import token_rows
from offchain.protocol.dataset import _ParametersFromInit, initial_state, write_job
from offchain.protocol.jobfile import load
from small_job import write_dropout_job, write_small_job


def _llama(d):
    cfg = {"vocab": 256, "d_model": 32, "n_layers": 2, "n_heads": 2, "d_ff": 64, "max_seq": 16}
    return write_job(d, "llama", cfg, {"tokens": token_rows(16, rows=8)}, steps=2, batch_size=2)


def _with_fills(job, monkeypatch):
    """initial_state with torch's fills run (the mode that skips them made a no-op)."""
    with monkeypatch.context() as m:
        m.setattr(dataset, "_ParametersFromInit", contextlib.nullcontext)
        return initial_state(job)


def _bits(st):
    return [t.detach().clone() for t in st.tensors()] + [b.clone() for b in st.model.buffers()]


@pytest.mark.parametrize("write", [write_small_job, _llama, write_dropout_job], ids=["mlp", "llama", "program"])
def test_a_fresh_state_is_the_one_built_with_torch_fills_whatever_the_rng_holds(tmp_path, monkeypatch, write):
    job = load(write(tmp_path / "job"))
    torch.manual_seed(1)
    want = _bits(_with_fills(job, monkeypatch))
    for seed in (1, 2):
        torch.manual_seed(seed)
        got = _bits(initial_state(job))
        assert len(got) == len(want)
        for a, b in zip(got, want):
            assert a.dtype == b.dtype and a.shape == b.shape
            assert torch.equal(a.reshape(-1).view(torch.uint8), b.reshape(-1).view(torch.uint8))


def test_only_a_parameters_random_fill_is_skipped():
    p, w, t = torch.nn.Parameter(torch.zeros(64)), torch.nn.Parameter(torch.zeros(8, 8)), torch.zeros(64)
    with _ParametersFromInit():
        torch.nn.init.kaiming_uniform_(w)
        torch.nn.init.xavier_normal_(w)
        torch.nn.init.normal_(p)
        with torch.no_grad():
            p.uniform_()
        t.uniform_()
        torch.nn.init.normal_(t)
        torch.nn.init.ones_(p)  # a deterministic fill runs
    assert torch.equal(p.detach(), torch.ones(64)) and not w.detach().any()
    assert t.abs().sum() > 0


def test_the_skip_is_this_threads_only():
    seen = {}

    def other():
        q = torch.nn.Parameter(torch.zeros(32))
        torch.nn.init.uniform_(q)
        seen["filled"] = bool(q.detach().abs().sum() > 0)
    with _ParametersFromInit():
        th = threading.Thread(target=other)
        th.start()
        th.join()
    assert seen["filled"]
