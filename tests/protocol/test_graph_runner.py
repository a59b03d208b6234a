"""The trainer's CUDA-graph runner (offchain/trainer/graphs.py), its control flow without a GPU:
torch.cuda's graph, streams and capture replaced by fakes that say what ran where. Every step
must be applied exactly once: the first eagerly (on a side stream), the second captured (a
capture runs nothing) and replayed at once, the next ones replayed with their own batch; a new
state or batch shape warms and captures again; a capture that fails runs that step eagerly,
once, and every later step too. tests/cuda/test_graphs_gpu.py runs the real thing on a GPU."""
import contextlib

import pytest
import torch

from offchain.trainer import graphs as G


class FakeCuda:
    """torch.cuda's graph and stream calls as a log: a capture records the step's function (it
    runs it, as capture does the Python, but its kernels count only when replayed)."""

    def __init__(self, fail_capture=False):
        self.log, self.capturing, self.fail = [], False, fail_capture
        fake = self

        class Graph:
            def replay(self):
                fake.log.append("replay")

        @contextlib.contextmanager
        def graph(g):
            fake.capturing = True
            try:
                yield
                if fake.fail:
                    raise RuntimeError("operation not permitted when stream is capturing")
            finally:
                fake.capturing = False

        class Stream:
            def wait_stream(self, other):
                pass

        @contextlib.contextmanager
        def stream(s):
            fake.log.append("side stream")
            yield

        self.attrs = {"CUDAGraph": Graph, "graph": graph, "Stream": Stream, "stream": stream,
                      "current_stream": lambda: Stream(), "synchronize": lambda: None}


@pytest.fixture
def fake_cuda(monkeypatch):
    def install(**kw):
        f = FakeCuda(**kw)
        for name, value in f.attrs.items():
            monkeypatch.setattr(torch.cuda, name, value)
        return f
    return install


class State:
    def __init__(self):
        self.w = torch.zeros(3)

    def tensors(self):
        return [self.w]


def _run_step(fake, st, applied):
    def run_step(batch):
        if fake.capturing:
            fake.log.append("captured")
            return torch.tensor(0.0)  # (the graph's loss tensor)
        applied.append(batch[0].clone())
        fake.log.append("eager")
        return batch[0].sum()
    return run_step


def test_the_first_step_is_eager_the_second_captured_and_replayed_each_step_applied_once(fake_cuda):
    fake, st, applied = fake_cuda(), State(), []
    runner, step = G.GraphRunner(), _run_step(fake, st, applied)
    batches = [(torch.full((2,), float(i)),) for i in range(4)]
    for b in batches:
        runner.run(st, b, step)
    assert fake.log == ["side stream", "eager", "captured", "replay", "replay", "replay"]
    assert runner.graph.replays == 3 and not runner.failed
    assert torch.equal(runner.graph.static[0], batches[-1][0])  # each replay reads its own batch
    # a new state (another memory) or another batch shape: warmed up and captured again
    runner.run(State(), batches[0], step)
    runner.run(st, (torch.zeros(5),), step)
    assert fake.log[-2:] == ["side stream", "eager"] and len(applied) == 3


def test_a_capture_that_fails_runs_the_step_eagerly_once_and_every_later_step(fake_cuda):
    fake, st, applied = fake_cuda(fail_capture=True), State(), []
    runner, step = G.GraphRunner(), _run_step(fake, st, applied)
    for i in range(3):
        runner.run(st, (torch.full((2,), float(i)),), step)
    assert fake.log == ["side stream", "eager", "captured", "eager", "eager"]
    assert [float(b[0]) for b in applied] == [0.0, 1.0, 2.0]  # every step once, in order
    assert runner.graph is None and "not permitted" in runner.failed


def test_graphs_are_off_unless_asked(monkeypatch):
    monkeypatch.delenv("VERDE_CUDA_GRAPHS", raising=False)
    assert not G.enabled(None) and G.enabled(True)
    monkeypatch.setenv("VERDE_CUDA_GRAPHS", "1")
    assert G.enabled(None) and not G.enabled(False)
