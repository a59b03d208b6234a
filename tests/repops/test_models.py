"""Models we did not write (model_zoo.py: Hugging Face families and torch.nn) train under
RepOps with the same bits on 1 and 2 threads, the same bits on the compiled backend and the
numpy spec, outputs that do not depend on the batch, the same graph on every device (no
device-specific aten op), torch's integer semantics, and clear errors for what is out of scope."""
import contextlib

import pytest
import torch
import torch.nn.functional as F

import repops
from repops import DTypeError, UnsupportedOpError
from repops.models.quick_train import num_threads
from repops.optim import AdamW

from model_zoo import MODELS


def train(name, backend="cpu", threads=1, steps=2, native=False, device="cpu"):
    model, batch, loss = MODELS[name]()
    model.to(device).train()
    opt = AdamW(model.parameters(), lr=1e-2)
    batches = [[a.to(device) for a in batch(s)] for s in range(steps)]  # random data is drawn outside RepOps
    losses = []
    with num_threads(threads), contextlib.nullcontext() if native else repops.deterministic(backend):
        for args in batches:
            opt.zero_grad(set_to_none=True)
            step_loss = loss(model, *args)
            step_loss.backward()
            if native:
                break
            opt.step()
            losses.append(step_loss.detach())
    if native:
        return step_loss.detach()
    return [l.cpu() for l in losses], torch.cat([t.detach().cpu().reshape(-1).float()
                                                 for t in model.state_dict().values() if t.is_floating_point()])


def bits(t):
    return t.contiguous().view(torch.int32)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_trains_with_the_same_bits_on_1_and_2_threads(name):
    l1, p1 = train(name, threads=1)
    l2, p2 = train(name, threads=2)
    assert torch.equal(bits(p1), bits(p2)) and all(torch.equal(bits(a), bits(b)) for a, b in zip(l1, l2))
    assert not torch.equal(bits(p1), bits(train(name, steps=0)[1])), "training must change the parameters"
    # a semantic check: RepOps' first loss is native torch's, to rounding
    torch.testing.assert_close(l1[0], train(name, native=True), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name,backend", [("hf-gpt2", "cpu"), ("hf-llama-sdpa", "cpu"), ("nn-cnn", "cpu"),
                                          ("nn-recurrent", "cpu"), ("nn-encoder", "cpu"), ("nn-cnn", "cuda-emu"),
                                          ("nn-recurrent", "cuda-emu"), ("nn-encoder", "cuda-emu")])
def test_the_compiled_backends_give_the_specs_bits(name, backend):
    """cpu: the C kernels; cuda-emu: the CUDA sources under the CPU emulation."""
    _, p_fast = train(name, backend, steps=1)
    _, p_ref = train(name, "reference", steps=1)
    assert torch.equal(bits(p_fast), bits(p_ref))


def _outputs(model, args):
    if hasattr(model, "config") and model.config.is_encoder_decoder:
        return model(input_ids=args[0], decoder_input_ids=args[0]).logits
    out = model(args[0])
    return out.logits if hasattr(out, "logits") else out


@pytest.mark.parametrize("name", sorted(MODELS))
def test_a_row_alone_gives_the_bits_it_gives_in_its_batch(name):
    model, batch, _ = MODELS[name]()
    model.eval()
    args = batch(0)
    with repops.deterministic(), torch.no_grad():
        whole = _outputs(model, args)
        for i in range(args[0].shape[0]):
            alone = _outputs(model, [a[i:i + 1] for a in args])
            assert torch.equal(bits(alone), bits(whole[i:i + 1])), f"row {i}"


DEVICE_SPECIFIC = ("flash", "efficient", "cudnn", "mkldnn", "_for_cpu", "native_dropout", "bernoulli", "with_indices",
                   "_thnn", "lstm_cell", "gru_cell")


@pytest.mark.parametrize("name,expect", [("hf-llama-sdpa", "repops.attention"), ("hf-gpt2", "repops.attention"),
                                         ("nn-encoder", "repops.attention"), ("nn-cnn", "repops.max_pool"),
                                         ("nn-recurrent", "aten.mm")])
def test_the_graph_has_no_device_specific_op(name, expect):
    """torch picks fused attention, pooling and RNN kernels per device; RepOps captures them
    above that choice, so a step records the same ops on a CPU and a GPU."""
    model, batch, loss = MODELS[name]()
    seen, args = set(), batch(0)
    with repops.deterministic(trace=lambda func, args, kwargs, out: seen.add(str(func))):
        loss(model, *args).backward()
    assert not [op for op in seen if any(s in op for s in DEVICE_SPECIFIC)], sorted(seen)
    assert any(op.startswith(expect) for op in seen), sorted(seen)


# -- integers stay integers (torch's dtypes, wrap-around and errors) --------------------------------------------
def test_integer_ops_keep_torch_dtypes_and_exact_values():
    big = torch.tensor([2 ** 24 + 1, 2 ** 31 + 7, 2 ** 62 + 3])
    mask = torch.tensor([True, False, True, True])
    with repops.deterministic():
        pos = torch.arange(4) + 1
        wide = big + 0
        wrapped = torch.tensor([2 ** 63 - 1]) + 1
        count = mask.sum()
        both = mask & torch.tensor([True, True, False, True])
        padded = F.pad(torch.tensor([[1, 2]]), (0, 1), value=-100)
    assert pos.dtype == torch.int64 and pos.tolist() == [1, 2, 3, 4]
    assert wide.dtype == torch.int64 and wide.tolist() == big.tolist()
    assert wrapped.tolist() == [-2 ** 63]
    assert count.dtype == torch.int64 and int(count) == 3
    assert both.dtype == torch.bool and both.tolist() == [True, False, False, True]
    assert padded.dtype == torch.int64 and padded.tolist() == [[1, 2, -100]]


def test_integer_mean_fails_as_in_torch():
    with pytest.raises(RuntimeError) as native:
        torch.arange(4).mean()
    with pytest.raises(RuntimeError) as ours:
        with repops.deterministic():
            torch.arange(4).mean()
    assert str(ours.value).split("\n")[0] == str(native.value).split("\n")[0]


@pytest.mark.parametrize("index", [lambda w, i: F.embedding(i.float() + 0.7, w), lambda w, i: w[i.float()],
                                   lambda w, i: torch.gather(w, 0, i.float()[:, None].expand(-1, 4))])
def test_float_indices_are_refused(index):
    w, i = torch.randn(10, 4), torch.tensor([1, 3])
    with pytest.raises(IndexError, match="integer"):
        with repops.deterministic():
            index(w, i)


# -- what stays out of scope: one clear error each ---------------------------------------------------------------
def test_active_dropout_without_a_key_is_refused_naming_the_key():
    """GPT-2's default config drops (0.1): without repops.dropout_key the error says how to
    give one; with it, it trains (tests/repops/test_dropout.py); in eval it needs none."""
    import transformers as T
    model = T.GPT2LMHeadModel(T.GPT2Config(vocab_size=50, n_embd=16, n_layer=1, n_head=2, n_positions=16))
    ids = torch.randint(0, 50, (1, 6))
    with pytest.raises(UnsupportedOpError, match=r"dropout.*repops\.dropout_key\(seed, step\)"):
        with repops.deterministic():
            model(input_ids=ids, labels=ids)
    with repops.deterministic(), repops.dropout_key(1, 1):
        model(input_ids=ids, labels=ids).loss.backward()
    model.eval()  # inactive dropout is the identity
    with repops.deterministic():
        model(input_ids=ids, labels=ids)


@pytest.mark.parametrize("opt", [torch.optim.Adam, torch.optim.AdamW, torch.optim.RMSprop])
def test_torch_optimizers_with_host_scalar_math_name_repops_optim(opt):
    w = torch.nn.Parameter(torch.randn(3))
    o = opt([w], lr=0.1)
    with pytest.raises(UnsupportedOpError, match="repops.optim.AdamW"):
        with repops.deterministic():
            (w * w).sum().backward()
            o.step()
    o.step()  # outside RepOps, torch's optimizer is untouched


@pytest.mark.parametrize("foreach", [False, True])
def test_sgd_and_clipping_give_the_same_bits_in_a_loop_and_foreach(foreach):
    """torch.optim.SGD (momentum, weight decay, nesterov) and clip_grad_norm_ are tensor ops:
    the foreach path (torch's default on CUDA) decomposes into the loop's per-tensor ops."""
    def run(fe, backend="cpu"):
        torch.manual_seed(0)
        m = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Tanh(), torch.nn.Linear(5, 2))
        opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9, weight_decay=0.01, nesterov=True, foreach=fe)
        x, y = torch.randn(8, 6), torch.randn(8, 2)
        with repops.deterministic(backend):
            for _ in range(3):
                opt.zero_grad()
                ((m(x) - y) ** 2).mean().backward()
                torch.nn.utils.clip_grad_norm_(m.parameters(), 0.1, foreach=fe)
                opt.step()
        return torch.cat([p.detach().flatten() for p in m.parameters()])
    assert torch.equal(bits(run(foreach)), bits(run(not foreach)))
    assert torch.equal(bits(run(foreach)), bits(run(foreach, "reference")))


def test_autocast_and_low_precision_get_one_message_that_says_what_to_do():
    m, x = torch.nn.Linear(4, 2), torch.randn(3, 4)
    with pytest.raises(UnsupportedOpError, match="autocast.*remove the autocast"):
        with repops.deterministic(), torch.autocast("cpu", dtype=torch.bfloat16):
            m(x)
    m, x = m.bfloat16(), x.bfloat16()
    with pytest.raises(DTypeError, match="bf16/fp16.*autocast"):
        with repops.deterministic():
            m(x)


_PACKED = torch.nn.utils.rnn.pack_padded_sequence(torch.randn(4, 2, 3), [4, 2])


@pytest.mark.parametrize("call,match", [
    (lambda x, lstm, lstm2: lstm(_PACKED), "PackedSequence"),
    (lambda x, lstm, lstm2: lstm2(x[0]), "dropout"),
    (lambda x, lstm, lstm2: torch.igamma(x, x), r"aten\.igamma"),
    (lambda x, lstm, lstm2: torch.randn(3) + x, "random numbers.*before entering"),
    (lambda x, lstm, lstm2: torch.nn.init.normal_(x), "random numbers"),
])
def test_unsupported_model_features_name_themselves(call, match):
    x = torch.randn(1, 4, 2, 3)
    lstm, lstm2 = torch.nn.LSTM(3, 2), torch.nn.LSTM(3, 2, num_layers=2, dropout=0.5)
    with pytest.raises(UnsupportedOpError, match=match):
        with repops.deterministic():
            call(x, lstm, lstm2)
