"""A program job cannot be half-written (issue #39): write_program_job runs one real step under
RepOps before anything is in place, names the op and the model's line a refusal comes from,
leaves nothing behind when a check fails; the delivered model is the client's own state_dict;
every error the client's model causes is exit 2 with the op, the reason and the fix, printed
with its brackets."""
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from offchain.cli import main
from offchain.protocol import dataset, program
from offchain.protocol.dataset import write_inference_job, write_program_job
from offchain.protocol.job import JobError
from offchain.protocol.jobfile import load

sys.path.insert(0, str(Path(__file__).resolve().parent))
HERE = Path(__file__).name


def _data(n=8):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(n, 4, generator=g), "y": torch.randint(0, 3, (n,), generator=g)}


class RefusedOnValues(torch.nn.Module):
    """Meta shapes are fine (torch's meta kernel); RepOps refuses it only where it computes
    (polygamma of order 9: RepOps defines n <= 8)."""

    def __init__(self):
        super().__init__()
        self.l = torch.nn.Linear(4, 3)

    def forward(self, x, y):
        h = self.l(x)
        return torch.nn.functional.cross_entropy(h, y) + torch.polygamma(9, h.abs() + 1).sum()  # the refused line


class Empty(torch.nn.Module):
    """Exports, but its state has a tensor of no elements (check_fits refuses it)."""

    def __init__(self):
        super().__init__()
        self.l, self.nothing = torch.nn.Linear(4, 3), torch.nn.Parameter(torch.empty(0))

    def forward(self, x, y):
        return torch.nn.functional.cross_entropy(self.l(x), y)


class TiedMaskedLM(torch.nn.Module):
    """A tied head, a persistent mask buffer that folding replaces, dropout (a step counter and
    `model.` names in the program): none of that may reach the client's delivered state."""

    def __init__(self):
        super().__init__()
        self.emb, self.head, self.drop = torch.nn.Embedding(6, 4), torch.nn.Linear(4, 6, bias=False), torch.nn.Dropout(0.2)
        self.head.weight = self.emb.weight
        self.register_buffer("mask", torch.tril(torch.ones(6, 6)))

    def forward(self, x, y):
        h = self.head(self.drop(self.emb(y)))
        return torch.nn.functional.cross_entropy(h.masked_fill((self.mask == 0)[y], -1.0), y) + 0 * x.sum()


def _nothing_left(parent: Path, name: str):
    assert not (parent / name).exists()
    assert [p.name for p in parent.iterdir() if p.name.startswith(f".{name}.")] == []


def test_a_refusal_only_real_values_show_is_found_before_writing_with_the_op_and_the_model_line(tmp_path):
    with pytest.raises(JobError) as e:
        write_program_job(tmp_path / "job", RefusedOnValues(), _data(), ["x", "y"], steps=2, batch_size=4)
    said = str(e.value)
    assert "aten.polygamma" in said and "polygamma(n=9)" in said, said
    assert f"{HERE}:" in said and "the refused line" in said and "Fix:" in said, said
    _nothing_left(tmp_path, "job")


def test_a_failed_check_leaves_no_job_file_behind(tmp_path):
    with pytest.raises(JobError, match="no elements"):
        write_program_job(tmp_path / "job", Empty(), _data(), ["x", "y"], steps=2, batch_size=4)
    _nothing_left(tmp_path, "job")


def test_a_job_rewritten_into_its_directory_is_the_new_one(tmp_path):
    torch.manual_seed(0)
    first = load(write_program_job(tmp_path / "job", TiedMaskedLM(), _data(), ["x", "y"], steps=2, batch_size=4))
    again = load(write_program_job(tmp_path / "job", TiedMaskedLM(), _data(), ["x", "y"], steps=3, batch_size=4))
    assert again.spec.steps == 3 and again.job_id != first.job_id
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job"]


def test_the_trained_state_loads_strictly_into_the_client_s_own_module(tmp_path, capsys):
    torch.manual_seed(0)
    mine = TiedMaskedLM()
    job = write_program_job(tmp_path / "job", mine, _data(), ["x", "y"], steps=2, batch_size=4, fanout=2, chunk=64)
    init = load_file(str(tmp_path / "job" / "init.safetensors"))
    assert any(k.startswith("folded_") for k in init) and program.DROPOUT_STEP in init  # what must not be delivered
    assert main(["train", str(job), "--out", str(tmp_path / "out.safetensors")]) == 0, capsys.readouterr().out
    out = load_file(str(tmp_path / "out.safetensors"))
    assert sorted(out) == sorted(mine.state_dict())
    fresh = TiedMaskedLM()
    fresh.load_state_dict(out, strict=True)
    assert not torch.equal(fresh.emb.weight, mine.emb.weight)  # trained
    assert torch.equal(fresh.mask, mine.mask)


def test_an_inference_job_delivers_the_client_s_keys_and_its_outputs(tmp_path, capsys):
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 3))
    job = write_inference_job(tmp_path / "job", net, {"x": _data()["x"]}, ["x"], batch_size=4)
    assert main(["train", str(job), "--out", str(tmp_path / "out.safetensors")]) == 0, capsys.readouterr().out
    out = load_file(str(tmp_path / "out.safetensors"))
    assert sorted(out) == sorted([*net.state_dict(), program.OUTPUTS])
    torch.nn.Sequential(torch.nn.Linear(4, 3)).load_state_dict({k: v for k, v in out.items() if k != "outputs"},
                                                                strict=True)


def _refused_job(tmp_path, monkeypatch):
    """The refused model as a job file, written past the first-step check (as an older verde wrote it)."""
    with monkeypatch.context() as m:
        m.setattr(dataset, "check_first_step", lambda job: None, raising=False)
        return write_program_job(tmp_path / "job", RefusedOnValues(), _data(), ["x", "y"], steps=2, batch_size=4)


def test_verde_train_on_a_refused_program_names_the_op_and_the_model_line(tmp_path, capsys, monkeypatch):
    job = _refused_job(tmp_path, monkeypatch)
    rc = main(["train", str(job)])
    out = capsys.readouterr().out
    assert rc == 2, out
    assert "aten.polygamma" in out and f"{HERE}:" in out and "Fix:" in out, out
    assert "bug in verde" not in out and "--device" not in out, out


def test_verde_train_says_a_model_s_index_error_is_the_model_s_not_a_bug(tmp_path, capsys, monkeypatch):
    """torch's own IndexError from an op of the program (here raised by its loss kernel) is exit 2."""
    import repops.aten as A
    job = _refused_job(tmp_path, monkeypatch)

    def out_of_bounds(*args, **kwargs):
        raise IndexError("Target 7 is out of bounds.")
    monkeypatch.setitem(A.REGISTRY, torch.ops.aten.nll_loss_forward.default, out_of_bounds)
    rc = main(["train", str(job)])
    out = capsys.readouterr().out
    assert rc == 2, out
    assert "IndexError: Target 7 is out of bounds." in out and "aten.cross_entropy_loss" in out, out
    assert "bug in verde" not in out, out


def test_an_error_the_program_did_not_raise_is_not_called_the_model_s():
    from offchain.protocol.model_errors import explain

    def fails(e):
        try:
            raise e
        except Exception as caught:  # noqa: BLE001
            return explain(caught, "at step 1")
    assert fails(RuntimeError("a bug in the trainer")) is None  # stays exit 1: a bug, with --debug's traceback
    assert fails(ZeroDivisionError("x")) is None
    import repops
    said = str(fails(repops.UnsupportedOpError("aten.foo is not implemented by RepOps")))  # (a backward's op)
    assert "aten.foo" in said and "Fix:" in said


def test_an_error_prints_with_its_brackets(capsys, monkeypatch):
    from offchain.cli import trainer

    def refused(args):
        raise JobError("aten.index.Tensor of a float tensor with 2 index tensors ([torch.int64, torch.int64])")
    add = trainer.add

    def adding(sub):
        add(sub)
        sub.choices["train"].set_defaults(fn=refused)
    monkeypatch.setattr(trainer, "add", adding)
    assert main(["train", "job.yaml"]) == 2
    assert "([torch.int64, torch.int64])" in " ".join(capsys.readouterr().out.split())


def test_any_command_says_an_error_of_the_program_s_ops_is_the_model_s(tmp_path, capsys, monkeypatch):
    """The agent and the demo run programs too: main() itself names the op and the line (exit 2)."""
    from offchain.cli import client
    prog, state = program.export(RefusedOnValues(), (torch.randn(4, 4), torch.zeros(4, dtype=torch.long)))
    m = program.load(prog, state)

    x, y = torch.randn(4, 4), torch.tensor([0, 1, 2, 0])

    def runs_the_program(args):
        import repops
        with repops.deterministic():
            m(x, y)  # refused: polygamma of order 9
    add = client.add

    def adding(sub):
        add(sub)
        sub.choices["withdraw"].set_defaults(fn=runs_the_program)
    monkeypatch.setattr(client, "add", adding)
    assert main(["withdraw"]) == 2
    out = " ".join(capsys.readouterr().out.split())
    assert "aten.polygamma" in out and "the refused line" in out and "bug in verde" not in out, out


def test_an_op_repops_lacks_is_named_with_the_model_line_before_anything_is_written(tmp_path):
    class Gamma(RefusedOnValues):
        def forward(self, x, y):
            h = self.l(x).abs() + 1
            return torch.nn.functional.cross_entropy(torch.igamma(h, h), y)  # no RepOps igamma
    with pytest.raises(JobError) as e:
        write_program_job(tmp_path / "job", Gamma(), _data(), ["x", "y"], steps=2, batch_size=4)
    said = str(e.value)
    assert "aten.igamma" in said and f"{HERE}:" in said and "no RepOps igamma" in said, said
    _nothing_left(tmp_path, "job")


def test_a_first_batch_that_faults_is_refused_before_writing(tmp_path):
    """Every label out of range: a trainer would claim the fault at step 0, and the client pay for nothing."""
    class Plain(RefusedOnValues):
        def forward(self, x, y):
            return torch.nn.functional.cross_entropy(self.l(x), y)
    data = {**_data(), "y": torch.full((8,), 5)}
    with pytest.raises(JobError, match="(?s)the first step cannot be computed.*Fix: correct the data"):
        write_program_job(tmp_path / "job", Plain(), data, ["x", "y"], steps=2, batch_size=4)
    _nothing_left(tmp_path, "job")


class _Reverse(torch.autograd.Function):
    """A gradient reversal layer (domain adaptation): forward x, backward -grad."""

    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        return -g


class _Reversed(torch.nn.Module):
    def __init__(self, reverse):
        super().__init__()
        self.lin, self.reverse = torch.nn.Linear(4, 3), reverse

    def forward(self, x, y):
        return torch.nn.functional.cross_entropy(self.reverse(self.lin(x)), y)


def test_a_custom_backward_a_program_would_drop_is_refused_before_writing(tmp_path):
    """torch.export keeps a custom autograd.Function's forward only: as a program, a gradient
    reversal trained with the un-reversed gradient, silently. It is refused, naming the Function
    and the plain-torch rewrite; the rewrite exports and trains with the reversal's gradient."""
    d = _data()
    with pytest.raises(JobError, match=r"(?s)_Reverse, whose hand-written backward.*2 \* x.detach\(\) - x") as e:
        write_program_job(tmp_path / "job", _Reversed(_Reverse.apply), d, ["x", "y"], steps=2, batch_size=4)
    assert "torch.export could not capture" not in str(e.value)  # (ours, not wrapped as torch's)
    assert not (tmp_path / "job").exists()
    torch.manual_seed(0)
    custom = _Reversed(_Reverse.apply)
    torch.manual_seed(0)
    plain = _Reversed(lambda x: 2 * x.detach() - x)
    prog, state = program.export(plain, (d["x"][:4], d["y"][:4]))
    loaded = program.load(prog, {k: v.clone() for k, v in state.items()})
    grads = []
    for m, f in ((custom, custom), (loaded, loaded.loss)):
        f(d["x"][:4], d["y"][:4]).backward()
        grads.append(dict(m.named_parameters())["lin.weight"].grad)
    assert torch.equal(grads[0], grads[1]) and grads[0].abs().sum() > 0


def test_a_frozen_parameter_stays_frozen_when_the_model_draws_dropout():
    """A parameter the client froze (a LoRA base, a frozen encoder, Hugging Face's sinusoidal
    position tables) is a buffer of the program, also when the model draws dropout or layerdrop
    and is exported inside the dropout wrapper, whose names start with `model.`: the frozen set
    was matched by the module's own names there, so the job trained the frozen base silently
    (found by the models-in-the-wild probe: Pegasus's and Marian's position tables trained)."""
    import repops

    class Frozen(torch.nn.Module):
        def __init__(self, p):
            super().__init__()
            torch.manual_seed(0)
            self.base, self.head, self.drop = torch.nn.Linear(4, 4), torch.nn.Linear(4, 1), torch.nn.Dropout(p)
            self.base.requires_grad_(False)

        def forward(self, x):
            return self.head(self.drop(self.base(x))).sum()

    x = torch.randn(2, 4, generator=torch.Generator().manual_seed(1))
    for p, prefix in ((0.0, ""), (0.1, "model.")):
        data, state = program.export(Frozen(p), (x,))
        prog = program.load(data, {k: v.clone() for k, v in state.items()})
        assert sorted(n for n, t in prog.named_parameters() if t.requires_grad) == [prefix + "head.bias",
                                                                                   prefix + "head.weight"], p
        base = {n: b for n, b in prog.named_buffers() if n.startswith(prefix + "base.")}
        assert sorted(base) == [prefix + "base.bias", prefix + "base.weight"], p
        with repops.deterministic():
            prog.loss(x).backward()
        assert all(b.grad is None for b in base.values())


def test_a_distribution_s_value_check_is_refused_at_export_with_its_switch_and_exports_without_it():
    """torch.distributions checks its parameters' values in Python when it builds a distribution
    (time-series heads: Hugging Face's TimeSeriesTransformer builds a StudentT): refused at export
    naming validate_args; built with validate_args=False, the program steps with the module's bits."""
    from stepping import bits, program_and_module

    class Head(torch.nn.Module):
        def __init__(self, validate):
            super().__init__()
            self.proj, self.validate = torch.nn.Linear(4, 2), validate

        def forward(self, x, y):
            loc, scale = self.proj(x).unbind(-1)
            d = torch.distributions.Normal(loc, torch.nn.functional.softplus(scale), validate_args=self.validate)
            return -d.log_prob(y).mean()

    torch.manual_seed(0)
    batch = (torch.randn(3, 4), torch.randn(3))
    with pytest.raises(JobError, match="validate_args=False"):
        program.export(Head(True), batch)
    module = Head(False)
    data, state = program.export(module, batch)
    prog = program.load(data, {k: v.clone() for k, v in state.items()})
    (lp, gp), (lm, gm) = program_and_module(prog, module, batch)
    assert torch.equal(bits(lp), bits(lm))
    assert set(gp) == set(gm) == {"proj.weight", "proj.bias"}
    assert all(torch.equal(bits(gp[k]), bits(gm[k])) for k in gm)
