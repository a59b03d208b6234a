"""A job's optimizer (repops.optim through OptimizerSpec): AdamW, Adam (L2) and SGD
(momentum, nesterov, weight decay), each optionally clipping the gradients' global norm
first and following a learning-rate schedule (warmup, linear or cosine decay). Each trains with the same bits on 1 and 2 threads, its committed graph is the honest
trace and settles on chain, SGD and clipping are torch's own arithmetic bit for bit, Adam is
torch's algorithm, a cheater at a clipping or SGD node loses, and a spec mixing the
optimizers' fields is a JobError naming the field."""
import json

import pytest
import torch

import repops
from offchain.dispute.context import Context
from offchain.protocol.dataset import batch, initial_state, optimizer, write_job
from offchain.protocol.job import JobError, parse
from offchain.protocol.jobfile import load
from offchain.protocol.trace import decode_structure
from offchain.trainer import Trainer
from offchain.trainer import adversaries as A
from playing import honest_wins_off_chain, off_chain
from small_job import mlp_data

CONFIGS = {
    "adamw-clipped": dict(name="adamw", lr=3e-3, max_grad_norm=0.5),
    "adam": dict(name="adam", lr=3e-3, weight_decay=0.01),
    "sgd": dict(name="sgd", lr=0.05, weight_decay=0.0),
    "sgd-momentum": dict(name="sgd", lr=0.05, momentum=0.9, weight_decay=1e-3),
    "sgd-nesterov-clipped": dict(name="sgd", lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-3,
                                 max_grad_norm=0.25),
    "adamw-cosine": dict(name="adamw", lr=3e-3, schedule=dict(name="cosine", warmup=1, min_lr_ratio=0.1)),
    "sgd-linear": dict(name="sgd", lr=0.05, momentum=0.9, schedule=dict(name="linear", warmup=2)),
}


def _job(d, optimizer, steps=4):
    return load(write_job(d, "mlp", {"d_in": 16, "d_hidden": 32, "n_classes": 10}, mlp_data(), steps=steps,
                          batch_size=8, fanout=2, chunk=64, optimizer=optimizer))


@pytest.mark.parametrize("name", CONFIGS)
def test_each_optimizer_trains_the_same_bits_on_any_thread_count_and_settles_on_chain(name, tmp_path, monkeypatch):
    job = _job(tmp_path / "job", CONFIGS[name])
    claims = []
    for threads in ("1", "2"):
        monkeypatch.setenv("REPOPS_NUM_THREADS", threads)
        t = Trainer(job, tmp_path / threads, threads)
        claims.append(t.train())
    assert claims[0] == claims[1]
    ctx = Context(job)
    assert [n.structure() for n in t.step_trace(1).nodes] == ctx.graph.structures
    assert ctx.kernel_graph.unsettled == []


def _steps(job, opt_of, clip=None, n=3):
    """n steps of the job's model on its batches under RepOps with the optimizer opt_of(params)
    makes; clip: clip_grad_norm_ first, as a user of torch's own optimizer would."""
    st = initial_state(job)
    opt = opt_of(st.model.parameters())
    for s in range(n):
        x, y = batch(job, s)
        opt.zero_grad(set_to_none=True)
        with repops.deterministic():
            st.model.loss(x, y).backward()
            if clip:
                torch.nn.utils.clip_grad_norm_(list(st.model.parameters()), clip, foreach=False)
            opt.step()
    return [p.detach().clone() for p in st.model.parameters()]


@pytest.mark.parametrize("name", ["sgd", "sgd-momentum", "sgd-nesterov-clipped"])
def test_sgd_and_clipping_are_torchs_own_arithmetic_bit_for_bit(name, tmp_path):
    cfg = CONFIGS[name]
    job = _job(tmp_path / "job", cfg)
    ours = _steps(job, lambda ps: optimizer(job.spec.optimizer, ps, job.spec.steps))
    theirs = _steps(job, lambda ps: torch.optim.SGD(ps, lr=cfg["lr"], momentum=cfg.get("momentum", 0.0),
                                                    nesterov=cfg.get("nesterov", False),
                                                    weight_decay=cfg["weight_decay"], foreach=False),
                    clip=cfg.get("max_grad_norm"))
    for a, b in zip(ours, theirs):
        assert torch.equal(a.view(torch.int32), b.view(torch.int32))


def test_adam_is_torchs_adam(tmp_path):
    """torch.optim.Adam runs only natively (its bias corrections are host pow): the same
    algorithm to rounding, not the same bits."""
    job = _job(tmp_path / "job", CONFIGS["adam"])
    ours = _steps(job, lambda ps: optimizer(job.spec.optimizer, ps, job.spec.steps))
    st = initial_state(job)
    opt = torch.optim.Adam(st.model.parameters(), lr=3e-3, weight_decay=0.01, foreach=False)
    for s in range(3):
        x, y = batch(job, s)
        opt.zero_grad(set_to_none=True)
        st.model.loss(x, y).backward()
        opt.step()
    for a, p in zip(ours, st.model.parameters()):
        torch.testing.assert_close(a, p.detach(), rtol=1e-4, atol=1e-6)
    adamw = _steps(job, lambda ps: optimizer(job.spec.optimizer.model_copy(update={"name": "adamw"}), ps,
                                                 job.spec.steps))
    assert any(not torch.equal(a, b) for a, b in zip(ours, adamw)), "L2 is not AdamW's decoupled decay"


@pytest.mark.parametrize("op,occurrence", [("aten.linalg_vector_norm.default", 0), ("aten.add_.Tensor", -1)])
def test_a_cheater_at_a_clipping_or_sgd_node_loses(op, occurrence, tmp_path):
    job = _job(tmp_path / "job", CONFIGS["sgd-nesterov-clipped"])
    ctx = Context(job)
    node = [j for j, s in enumerate(ctx.graph.structures) if decode_structure(s)[0] == op][occurrence]
    honest = Trainer(job, tmp_path / "honest", "honest")
    honest.train()
    bad = Trainer(job, tmp_path / "cheater", "cheater", behaviour=A.CorruptValue(step=1, node=node, ulps=1 << 12))
    bad.train()
    for v in honest_wins_off_chain(ctx, honest, bad):
        assert v.node == node and v.level == 5, str(v)


def test_an_adamw_job_without_the_new_fields_keeps_its_id(tmp_path):
    job = _job(tmp_path / "job", None)
    spec = job.spec.model_copy(update={"optimizer": job.spec.optimizer.model_copy(update={"nesterov": False})})
    assert b"momentum" not in job.spec.canonical() and b"max_grad_norm" not in job.spec.canonical()
    assert parse(spec.model_dump_json()).job_id == job.job_id


# An AdamW job's canonical form as every AdamW job has written it (pinned: its id must not move).
ADAMW_CANONICAL = (b'{"chunk":256,"data":{"batch_size":8,"seed":3,"sha256":"' + b"b" * 64 + b'"},"fanout":4,'
                   b'"init":{"sha256":"' + b"a" * 64 + b'"},"model":{"config":{"d_in":16},"name":"mlp"},'
                   b'"optimizer":{"betas":[0.9,0.999],"eps":1e-08,"lr":0.003,"name":"adamw","weight_decay":0.01},'
                   b'"steps":4,"version":1}')


def test_todays_adamw_job_keeps_its_canonical_form_and_id():
    import hashlib
    from offchain.protocol.job import DataSpec, FileRef, JobSpec, ModelSpec, OptimizerSpec
    spec = JobSpec(model=ModelSpec(name="mlp", config={"d_in": 16}), init=FileRef(file="i", sha256="a" * 64),
                   data=DataSpec(file="d", sha256="b" * 64, batch_size=8, seed=3), optimizer=OptimizerSpec(lr=3e-3),
                   steps=4)
    assert spec.canonical() == ADAMW_CANONICAL
    assert spec.job_id.hex() == "0a4b0432fbe519934929bcdc3f3f6eb7c30f549f3a9069a6f232eb8c127ce7b6"


@pytest.mark.parametrize("name,cls", [("adamw", torch.optim.AdamW), ("adam", torch.optim.Adam),
                                      ("sgd", torch.optim.SGD)])
def test_each_optimizer_has_torchs_defaults_and_only_its_own_fields(name, cls):
    from offchain.protocol.job import OptimizerSpec
    ours = OptimizerSpec(name=name, lr=0.1).hyper()
    theirs = cls([torch.nn.Parameter(torch.zeros(1))], lr=0.1).defaults
    for k, v in ours.items():
        if k != "max_grad_norm":
            assert (tuple(v) if k == "betas" else v) == (tuple(theirs[k]) if k == "betas" else theirs[k]), k
    written = OptimizerSpec(name=name, lr=0.1).model_dump(exclude_none=True)
    assert ("betas" in written and "eps" in written) == (name != "sgd")


def test_write_program_job_with_sgd_writes_sgds_fields_only(tmp_path):
    """The issue's case: an SGD job got AdamW's weight_decay 0.01 (torch's SGD has 0) and Adam's betas/eps."""
    import yaml
    from offchain.protocol.dataset import write_program_job
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(4, 3))

    class Loss(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = m

        def forward(self, x, y):
            return torch.nn.functional.cross_entropy(self.m(x), y)
    data = {"x": torch.randn(16, 4), "y": torch.randint(0, 3, (16,))}
    path = write_program_job(tmp_path / "job", Loss(), data, ["x", "y"], steps=2, batch_size=4,
                             optimizer={"name": "sgd", "lr": 0.05, "momentum": 0.9, "max_grad_norm": 1.0})
    assert yaml.safe_load(path.read_text())["optimizer"] == {
        "name": "sgd", "lr": 0.05, "weight_decay": 0.0, "momentum": 0.9, "max_grad_norm": 1.0}
    assert load(path).spec.optimizer.hyper()["weight_decay"] == 0.0


def test_an_sgd_job_file_with_adams_default_fields_still_loads_as_sgd(tmp_path):
    job = _job(tmp_path / "job", dict(name="sgd", lr=0.05))
    raw = job.spec.model_dump(mode="json", exclude_none=True)
    raw["optimizer"].update(betas=[0.9, 0.999], eps=1e-8, weight_decay=0.01)  # what the old writer wrote
    spec = parse(json.dumps(raw)).optimizer
    assert spec.betas is None and spec.eps is None and spec.weight_decay == 0.01


@pytest.mark.parametrize("fields,match", [
    (dict(name="adamw", lr=1e-3, momentum=0.9), "momentum and nesterov are SGD's"),
    (dict(name="sgd", lr=1e-3, betas=[0.9, 0.99]), "betas and eps are Adam's"),
    (dict(name="sgd", lr=1e-3, nesterov=True), "nesterov needs a momentum"),
    (dict(name="sgd", lr=1e-3, momentum=1.5), "optimizer.momentum"),
    (dict(name="adamw", lr=1e-3, max_grad_norm=0), "optimizer.max_grad_norm"),
    (dict(name="lion", lr=1e-3), "optimizer.name"),
])
def test_a_spec_mixing_the_optimizers_fields_is_a_job_error(fields, match, tmp_path):
    job = _job(tmp_path / "job", None)
    raw = job.spec.model_dump(mode="json", exclude_none=True)
    raw["optimizer"] = fields
    with pytest.raises(JobError, match=match):
        parse(json.dumps(raw))


def _lrs(kind, total, warmup, floor, lr=0.5):
    """The learning rates a Schedule gives steps 1..total under RepOps, from the counter the
    optimizer keeps (t += 1 before each step)."""
    from repops.optim import Schedule
    sch, t, out = Schedule(kind, total, warmup, floor), torch.zeros(()), []
    with repops.deterministic():
        for _ in range(total):
            t.add_(1.0)
            out.append(sch.lr(lr, t).clone())
    return torch.stack(out)


def test_a_linear_schedule_is_its_formula_in_binary32_and_a_cosine_one_its_shape():
    import numpy as np
    f = np.float32
    got = _lrs("linear", 10, 3, 0.2)
    want = []
    for t in range(1, 11):
        warm = min(f(t) / f(3), f(1))
        p = min(max((f(t) - f(3)) / f(7), f(0)), f(1))
        want.append(f(0.5) * (warm * (f(1) - p * (f(1) - f(0.2)))))
    assert torch.equal(got.view(torch.int32), torch.from_numpy(np.array(want, np.float32)).view(torch.int32))
    cos = _lrs("cosine", 10, 2, 0.1).tolist()
    assert cos[1] == 0.5 and abs(cos[-1] - 0.05) < 1e-7, "peak after warmup, the floor at the last step"
    assert cos[:2] == sorted(cos[:2]) and cos[1:] == sorted(cos[1:], reverse=True)
    for t, v in enumerate(cos[2:], 3):
        assert abs(v - 0.5 * (0.1 + 0.9 * 0.5 * (1 + np.cos(np.pi * (t - 2) / 8)))) < 1e-6


def test_a_cheater_at_the_schedules_cosine_loses(tmp_path):
    job = _job(tmp_path / "job", CONFIGS["adamw-cosine"])
    ctx = Context(job)
    node = next(j for j, s in enumerate(ctx.graph.structures) if decode_structure(s)[0] == "aten.cos.default")
    honest = Trainer(job, tmp_path / "honest", "honest")
    honest.train()
    bad = Trainer(job, tmp_path / "cheater", "cheater", behaviour=A.CorruptValue(step=2, node=node, ulps=1 << 12))
    bad.train()
    v = off_chain(ctx, bad, honest)
    assert v.winner == "honest" and v.losers == ["cheater"] and v.node == node and v.level == 5, str(v)


def test_a_schedule_whose_warmup_outlasts_the_job_is_a_job_error(tmp_path):
    job = _job(tmp_path / "job", None)
    raw = job.spec.model_dump(mode="json", exclude_none=True)
    raw["optimizer"]["schedule"] = {"name": "cosine", "warmup": raw["steps"]}
    with pytest.raises(JobError, match="optimizer.schedule.warmup 4 must be below steps 4"):
        parse(json.dumps(raw))
