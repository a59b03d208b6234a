"""A client's own model in a job: a torch.export program whose forward(*batch) returns the
loss, stored as the program's JSON alone (torch.export's schema). Every party hashes the
file and loads it without running the client's Python: no pickle is read (the weights come
from the job's init safetensors), and every call in the graph must be an aten or RepOps
operator (or a tuple index), checked before anything runs. docs/PROTOCOL.md §5."""
from __future__ import annotations

import contextlib
import functools
import inspect
import operator
from pathlib import Path

import torch

from .fold import fold
from .job import JobError

NAMESPACES = ("aten", "repops")


DROPOUT_STEP = "dropout_step"  # the step counter a program with dropout keeps in its state


class _Dropout(torch.nn.Module):
    """A model whose forward draws dropout masks or random numbers (torch.rand, randn, ...:
    repops/draws.py): each forward first counts itself in a state
    counter (binary32, from 0), then runs under repops.dropout_key(seed, counter), so the
    committed one-step graph reads the step as data and every step draws new masks, the
    same on every device (repops/random.py). The seed and each call's stream are constants
    of the program."""

    def __init__(self, model: torch.nn.Module, seed: int):
        super().__init__()
        self.model, self.seed = model, seed
        self.register_buffer(DROPOUT_STEP, torch.zeros((), dtype=torch.float32))

    def forward(self, *batch):
        from repops.random import dropout_key
        step = getattr(self, DROPOUT_STEP)
        step.add_(1.0)
        with dropout_key(self.seed, step):
            return self.model(*batch)


class _LayerDropGate:
    """Hugging Face's layerdrop as data. Its containers (OPT, BART, Whisper, Marian, Pegasus...:
    `self.layers` and `if torch.rand([]) < self.layerdrop: skip`) branch in Python on a draw, so
    a step's graph would depend on it. Put in place of `layerdrop` while the model is
    exported, this answers the comparison False (run the layer) and keeps the draw; a hook on
    each layer then writes the skip as data: h_out = where(u < p, h_in, layer(h_in)), the
    layer's input where Hugging Face would have skipped it (the same value, and no gradient
    reaches the layer). One graph for every step; the draw is still Hugging Face's own call,
    made by RepOps under the job's key."""

    def __init__(self, p: float):
        self.p, self.draws = p, []

    def __gt__(self, u):  # `u < gate`: torch's Tensor.__lt__ declines an object, Python asks the gate
        self.draws.append(u)  # (read by keep_or_skip, hooked where p > 0: at 0 nothing is skipped)
        return False

    def __lt__(self, u):  # `u > gate`: a draw made on the host (numpy's or Python's generator)
        raise JobError(f"layerdrop compared with a host draw ({type(u).__name__}): numpy's and Python's generators "
                       "are not a job's, and export would bake one draw into every step. Set that layerdrop to 0, "
                       "or draw with torch.rand (RepOps draws it under the job's key)")

    def keep_or_skip(self, layer, args, kwargs, out):
        if not self.draws:  # (eval mode: no draw, no skip)
            return out
        u = self.draws.pop()
        h = args[0] if args else kwargs["hidden_states"]
        first = out[0] if isinstance(out, tuple) else out
        kept = torch.where(u < self.p, h, first)
        return (kept, *out[1:]) if isinstance(out, tuple) else kept


def _layerdrop_owner(m: torch.nn.Module):
    """Where the container `m` reads its layerdrop: its own attribute (OPT, BART, Whisper...), or
    its config's when its forward says `self.config.layerdrop` (HuBERT, wav2vec2, WavLM, SEW,
    UniSpeech, data2vec-audio...); None for a container that has none."""
    if not isinstance(getattr(m, "layers", None), torch.nn.ModuleList):
        return None
    if hasattr(m, "layerdrop"):
        return m
    config = getattr(m, "config", None)
    if config is None or not hasattr(config, "layerdrop"):
        return None
    try:
        reads = "config.layerdrop" in inspect.getsource(type(m).forward)
    except (OSError, TypeError):  # (no source: a container we cannot read does not get a gate)
        reads = False
    return config if reads else None


@contextlib.contextmanager
def _layerdrop_as_data(module: torch.nn.Module):
    """Hugging Face's layerdrop containers in `module` gated (_LayerDropGate) for an export. A
    config shared by several containers gets one gate: each comparison is answered by its own
    layer's hook before the next one is made."""
    gated, hooks = {}, []
    for m in module.modules():
        owner = _layerdrop_owner(m)
        if owner is None:
            continue
        if id(owner) not in gated:
            p = owner.layerdrop
            if not (isinstance(p, (int, float)) and not isinstance(p, bool) and p >= 0):
                continue
            gated[id(owner)] = (owner, p, _LayerDropGate(float(p)))  # (0 too: `torch.rand([]) < 0` is a branch on a draw)
            object.__setattr__(owner, "layerdrop", gated[id(owner)][2])  # (past a config's field validation)
        _, p, gate = gated[id(owner)]
        if p > 0:
            hooks += [layer.register_forward_hook(gate.keep_or_skip, with_kwargs=True) for layer in m.layers]
    try:
        yield
    finally:
        for h in hooks:
            h.remove()
        for owner, p, _ in gated.values():
            object.__setattr__(owner, "layerdrop", p)


@contextlib.contextmanager
def _masks_as_eager():
    """Hugging Face's mask builders (transformers.masking_utils) as they run eagerly. When there is
    no padding mask they skip the attention mask (SDPA's is_causal, or no mask at all), but
    only if `is_tracing(padding_mask)` is False, and under torch.export it is True even for
    None, so the exported program built a mask the module never had: BEiT added a boolean mask
    of True to its relative position bias (+1 on every score: equal after softmax to rounding,
    not to the bit), Nystromformer a [B, 1, S, S] mask that its landmark scores [B, H, L, S]
    cannot take. With no tensor to read, the eager decision reads no value: it is the one a
    job's fixed shapes should keep. A padding mask that is a tensor stays traced (the mask is
    built, as for any batch). The models that skip building their default mask when compiling
    build it too (_default_mask_skippers)."""
    import sys
    masking = sys.modules.get("transformers.masking_utils")
    skippers = _default_mask_skippers()
    patched = [(m, "is_torchdynamo_compiling", m.is_torchdynamo_compiling) for m in skippers]
    for m in skippers:
        m.is_torchdynamo_compiling = _not_compiling
    if masking is not None and hasattr(masking, "is_tracing"):
        traced = masking.is_tracing
        patched.append((masking, "is_tracing", traced))
        masking.is_tracing = lambda tensor=None: False if tensor is None else traced(tensor)
    try:
        yield
    finally:
        for m, name, f in patched:
            setattr(m, name, f)


def _not_compiling() -> bool:
    return False


DEFAULT_MASK_SKIP = "attention_mask is None and not is_torchdynamo_compiling()"


def _default_mask_skippers() -> list:
    """The loaded Hugging Face modeling modules whose one use of is_torchdynamo_compiling is to
    skip their default all-ones attention mask when compiling (`if attention_mask is None and not
    is_torchdynamo_compiling(): attention_mask = torch.ones(...)`: LongT5, Switch Transformers,
    BART and its kin, 16 in transformers 5.17). Under export they then ran without the mask eager
    builds: LongT5's position bias kept batch 1 and its torch.cat failed. Their flag is False
    while exporting, so the program builds the mask from constants, as the module does (folded
    into init); a module that asks it anywhere else (a check it skips when compiling) is left
    alone."""
    import sys
    # (vars, not getattr: transformers' lazy package modules import whatever is asked of them)
    return [m for name, m in list(sys.modules.items()) if name.startswith("transformers.models.")
            and ".modeling_" in name and "is_torchdynamo_compiling" in vars(m)
            and _only_skips_the_default_mask(vars(m).get("__file__"))]


@functools.cache
def _only_skips_the_default_mask(path: str | None) -> bool:
    try:
        src = Path(path).read_text()
    except (OSError, TypeError):
        return False
    uses = src.count("is_torchdynamo_compiling()")
    return uses > 0 and uses == src.count(DEFAULT_MASK_SKIP)


# custom autograd Functions whose backward is their forward's derivative, written out by hand:
# the program's backward (autograd's, of the same forward) equals theirs to rounding, not to the bit
DERIVATIVE_BACKWARDS = frozenset({
    "transformers.models.bloom.modeling_bloom.GeLUFunction",  # bloom_gelu_back: d/dx of bloom_gelu_forward
})


def _applied_functions(module: torch.nn.Module, example_batch: tuple) -> set:
    """The torch.autograd.Function subclasses on the gradient's path: one forward of the example
    batch on fake tensors (shapes only, as torch.export's own: no memory, no value, the module's
    buffers and the random generator untouched), its autograd graph walked. A program keeps each
    Function's forward only: its hand-written backward is lost and autograd derives another from
    the forward ops, so a backward that is not the forward's derivative (a gradient reversal, a
    straight-through estimator, a clipped derivative) would train other gradients, silently."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv
    from torch.func import functional_call
    try:
        with FakeTensorMode(shape_env=ShapeEnv()) as fake, torch.random.fork_rng(devices=[]), torch.enable_grad():
            state = {k: fake.from_tensor(v).requires_grad_(v.requires_grad)
                     for k, v in {**dict(module.named_parameters(remove_duplicate=False)),
                                  **dict(module.named_buffers(remove_duplicate=False))}.items()}
            batch = tuple(fake.from_tensor(b) if isinstance(b, torch.Tensor) else b for b in example_batch)
            out = functional_call(module, state, batch, tie_weights=True, strict=False)
    except Exception:  # noqa: BLE001 - what fake tensors cannot run (a value-dependent shape): run it for real
        buffers = {k: b.detach().clone() for k, b in module.named_buffers()}
        with torch.random.fork_rng(devices=[]), torch.enable_grad():
            out = module(*example_batch)
        with torch.no_grad():
            for k, b in module.named_buffers():
                b.copy_(buffers[k])
    from .trace import _tensors  # (ModelOutput is a dict)
    todo = [t.grad_fn for t in _tensors(out) if t.grad_fn is not None]
    seen, found = set(), set()
    while todo:
        node = todo.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        if hasattr(node, "_forward_cls"):  # (a Python Function's backward node)
            found.add(node._forward_cls)
        todo += [n for n, _ in node.next_functions]
    return found


def _refuse_custom_backwards(applied) -> None:
    names = sorted({f"{c.__module__}.{c.__qualname__}" for c in applied if c.__module__.split(".")[0] != "torch"}
                   - DERIVATIVE_BACKWARDS)
    if names:
        raise JobError(f"the model applies torch.autograd.Function {', '.join(names)}, whose hand-written backward a "
                       "job's program cannot keep (torch.export records the forward; the program's gradient is "
                       "autograd's derivative of it, which a custom backward such as a gradient reversal or a "
                       "straight-through estimator is not). Fix: write the wanted gradient with plain torch ops, e.g. "
                       "a straight-through round as x + (torch.round(x) - x).detach(), a gradient reversal as "
                       "2 * x.detach() - x (forward x, backward -grad)")


def _in_distributions(tb) -> bool:
    """Whether a traceback passes through torch.distributions (its argument validation)."""
    while tb is not None:
        if "torch/distributions/" in tb.tb_frame.f_code.co_filename.replace("\\", "/"):
            return True
        tb = tb.tb_next
    return False


def _needs_dropout_key(e: BaseException) -> bool:
    from repops.random import NeedsDropoutKey
    while e is not None:
        if isinstance(e, NeedsDropoutKey):
            return True
        e = e.__cause__ or e.__context__
    return False


def export(module: torch.nn.Module, example_batch: tuple, seed: int = 0) -> tuple[bytes, dict]:
    """The client's side: (program JSON, state: parameters and buffers by name). The module's
    forward(*batch) must return the loss; shapes are fixed to the example batch's. What the
    step computes from constants alone is folded into the state (fold.py). A model that
    draws dropout or random numbers in training is exported inside _Dropout keyed by `seed`
    (its state's names then start with `model.`)."""
    prog, state, _ = exported(module, example_batch, seed)
    return prog, state


def exported(module: torch.nn.Module, example_batch: tuple, seed: int = 0, user: torch.nn.Module | None = None,
             prefix: str = "") -> tuple[bytes, dict, dict]:
    """export's (program, state) and the user's names: {key of user.state_dict(): its state
    name} (user: the client's own module, `module` unless a wrapper's `prefix` names it), so a
    delivered state loads into the client's module with load_state_dict(strict=True). Those
    tensors stay in the state even where folding leaves them unread."""
    user = module if user is None else user
    from torch._export.serde import schema
    from torch._export.serde.serialize import _bytes_to_dataclass, _to_json_bytes, serialize
    from repops.mode import RepOpsFunctions

    def capture(m):
        # attention, pooling, RNNs, dropout as on every device, in the program itself; layerdrop as data
        with RepOpsFunctions(), _layerdrop_as_data(module), _masks_as_eager():
            return torch.export.export(m, tuple(example_batch), strict=False)
    wrapped = ""  # the program's names of the module's own: under _Dropout, "model." first
    try:
        try:
            ep = capture(module)
        except Exception as e:  # noqa: BLE001
            if not _needs_dropout_key(e):
                raise
            ep = capture(_Dropout(module, seed))
            prefix, wrapped = "model." + prefix, "model."
    except Exception as e:  # noqa: BLE001 - torch.export's own errors say what in the model it cannot trace
        from .model_errors import user_frame
        line = user_frame(e.__traceback__)
        said = str(e)
        if "data-dependent" in said and "expert" in (line or "").lower():  # an MoE's eager experts loop
            said = said.splitlines()[0] + (
                "\n  Fix: the experts' eager path loops in Python over the experts that received tokens (torch.where / "
                "nonzero: a graph that depends on the routing). A job commits one graph for every step: use the "
                "grouped path, model.set_experts_implementation(\"grouped_mm\") (or the config's "
                "experts_implementation=\"grouped_mm\", Hugging Face's default; \"batched_mm\" also works): every "
                "expert is computed for every routed row and each keeps its own (docs/NUMERICS.md §8, MoE)")
        elif "data-dependent" in said and "label" in (line or "").lower():  # a head's check or selection of labels
            said = said.splitlines()[0] + (
                "\n  Fix: the model's loss reads the labels' values in Python (a check such as labels.max() < vocab, or "
                "keeping the labels >= 0 by nonzero/masked_select: a shape that depends on the batch). A job commits one "
                "graph for every step: compute the loss in your module's forward from the model's logits with a "
                "fixed-shape loss (cross_entropy with ignore_index, ctc_loss with padded targets and target lengths), or "
                "choose a head without it (e.g. config.problem_type=\"single_label_classification\")")
        elif "data-dependent" in said and _in_distributions(e.__traceback__):  # a distribution's own check
            said = said.splitlines()[0] + (
                "\n  Fix: torch.distributions checks its parameters' values in Python when it builds a distribution "
                "(validate_args: a branch on the batch's values). A job commits one graph for every step: where the "
                "model makes its parameters valid by construction (a softplus'd scale, ...), build it with "
                "validate_args=False, or torch.distributions.Distribution.set_default_validate_args(False) before "
                "exporting")
        elif "data-dependent" in said:  # torch's message goes on with the whole graph: its first line says it
            said = said.splitlines()[0] + (
                "\n  Fix: the model branches in Python on a tensor's value (e.g. `if torch.rand([]) < p: skip`). A job "
                "commits one graph for every step: write the choice as data, e.g. h = torch.where(torch.rand([]) < p, "
                "h, layer(h)) (docs/PROTOCOL.md §5; Hugging Face's own layerdrop is rewritten so by itself)")
        raise JobError(f"torch.export could not capture the model" + (f" at {line}" if line else "") +
                       f": {type(e).__name__}: {said[:2000]}") from None
    if module.training:  # (after the capture: a model it cannot trace is refused with its own reason)
        _refuse_custom_backwards(_applied_functions(module, example_batch))
    names = _user_names(user, prefix, ep.state_dict)
    if _writes_through_a_view(ep.graph):
        ep = ep.run_decompositions({})  # functional: the write is a slice_scatter/select_scatter node
        _differentiable_copies(ep.graph_module)
    _freeze(ep, {wrapped + n for n, p in module.named_parameters(remove_duplicate=False) if not p.requires_grad})
    fold(ep, keep=set(names.values()))
    bad = sorted(k for k, v in ep.constants.items() if not isinstance(v, torch.Tensor))
    if bad:
        raise JobError(f"the program holds non-tensor constants {bad[:5]} (script objects): not allowed in a job")
    artifact = serialize(ep, serialize_state_dict=False, serialize_constants=False, serialize_example_inputs=False)
    program = _bytes_to_dataclass(schema.ExportedProgram, artifact.exported_program)
    specs = []
    for spec in program.graph_module.signature.input_specs:  # tensors made in forward: buffers, in init
        if spec.type == "tensor_constant":
            c = spec.tensor_constant
            spec = schema.InputSpec.create(buffer=schema.InputToBufferSpec(
                arg=c.arg, buffer_name=c.tensor_constant_name, persistent=True))
        elif spec.type == "buffer":  # a non-persistent buffer (rotary tables, position ids) is in init too
            spec.buffer.persistent = True
        specs.append(spec)
    program.graph_module.signature.input_specs = specs
    state = {**ep.state_dict, **ep.constants}
    lost = sorted(k for k, n in names.items() if n not in state)
    if lost:  # (a parameter or buffer the graph does not see: nothing to deliver it from)
        raise JobError(f"the program has no state tensor for {lost[:5]} of the model's state_dict")
    return _to_json_bytes(program), {k: v.detach().contiguous() for k, v in state.items()}, names


OUTPUTS = "outputs"  # an inference program's buffer: every row's output, in row order


class _Inference(torch.nn.Module):
    """An inference job's step: the model's outputs for the batch, rolled into the state's
    last rows (cat(outputs[B:], y)), so after T steps of B rows in order `outputs` holds
    every row's output in row order. The outputs are state: checkpoint roots commit to them,
    the step bisection finds the first batch whose outputs differ, and the client gets
    them as it gets a trained model (docs/PROTOCOL.md §5)."""

    def __init__(self, model: torch.nn.Module, rows: int, y: torch.Tensor):
        super().__init__()
        self.model = model
        self.register_buffer(OUTPUTS, torch.zeros((rows, *y.shape[1:]), dtype=y.dtype))

    def forward(self, *batch):
        y = self.model(*batch)
        out = getattr(self, OUTPUTS)
        out.copy_(torch.cat([out[y.shape[0]:], y]))
        return y


def export_inference(module: torch.nn.Module, example_batch: tuple, rows: int) -> tuple[bytes, dict]:
    """An inference job's program: module.forward(*batch) returns one tensor whose first
    dimension is the batch's (logits, embeddings, predicted ids); its weights are frozen (state
    the step reads) and it runs in eval mode. rows: the dataset's, the outputs' first dimension."""
    prog, state, _ = exported_inference(module, example_batch, rows)
    return prog, state


def exported_inference(module: torch.nn.Module, example_batch: tuple, rows: int) -> tuple[bytes, dict, dict]:
    """export_inference's (program, state) and the client's names (exported's), the outputs
    under their own name."""
    module.eval()
    for p in module.parameters():
        p.requires_grad_(False)
    b = example_batch[0].shape[0] if example_batch and isinstance(example_batch[0], torch.Tensor) else None
    with torch.no_grad():
        y = module(*example_batch)
    if not isinstance(y, torch.Tensor) or y.dim() == 0 or y.shape[0] != b:
        got = f"{type(y).__name__} {list(y.shape)}" if isinstance(y, torch.Tensor) else type(y).__name__
        raise JobError(f"an inference model's forward(*batch) must return one tensor with the batch's {b} rows "
                       f"first, got {got}: return e.g. the logits (not a ModelOutput or a tuple)")
    if rows % b:
        raise JobError(f"the dataset's {rows} rows are not a whole number of batches of {b}: pad the data")
    prog, state, names = exported(_Inference(module, rows, y), example_batch, user=module, prefix="model.")
    return prog, state, {**names, OUTPUTS: OUTPUTS}


def _user_names(user: torch.nn.Module, prefix: str, exported: dict) -> dict:
    """{user's state_dict key: its name in the program's state}. A tied tensor (an LM head
    sharing the embedding's weight) is in the state once: its other keys name that one."""
    sd = user.state_dict(keep_vars=True)
    names = {k: prefix + k for k in sd}
    for k in sd:
        if names[k] not in exported:
            names[k] = next((prefix + o for o in sd if prefix + o in exported and sd[o] is sd[k]), names[k])
    return names


def _writes_through_a_view(graph) -> bool:
    """An in-place op whose written tensor is a view (T5 shifts its labels into
    new_zeros(...)[..., 1:]): a later read of the base has no producer the trace can name.
    Only then is the program functionalised: elsewhere torch's functional forms (batch norm's
    buffer updates) are not what RepOps runs."""
    for node in graph.nodes:
        t = node.target
        if node.op == "call_function" and isinstance(t, torch._ops.OpOverload) and t._schema.is_mutable:
            for arg, a in zip(t._schema.arguments, node.args):
                if (arg.alias_info is not None and arg.alias_info.is_write and isinstance(a, torch.fx.Node)
                        and a.op == "call_function" and isinstance(a.target, torch._ops.OpOverload)
                        and any(r.alias_info is not None for r in a.target._schema.returns)):
                    return True
    return False


def _differentiable_copies(gm: torch.fx.GraphModule) -> None:
    """Functionalisation writes `out[:, t] = v` as slice/select_scatter(out, copy(out[:, t], v)),
    and autograd has no derivative for aten.copy (a model writing a float slice in a loop, RWKV's
    state, could not train). copy(dst, src) is src in dst's dtype at dst's shape, a fresh
    tensor: clone(expand(src)) (a cast first where the dtypes differ), with the derivative
    autograd has for each, the same values."""
    aten, graph = torch.ops.aten, gm.graph
    for node in [n for n in graph.nodes if n.op == "call_function" and n.target is aten.copy.default]:
        dst, src = node.args[:2]
        d, x = dst.meta["val"], src
        with graph.inserting_before(node), d.fake_mode:
            for op, args, kwargs in ((aten._to_copy.default, (), {"dtype": d.dtype}),
                                     (aten.expand.default, (list(d.shape),), {}), (aten.clone.default, (), {})):
                v = x.meta["val"]
                if (op is aten._to_copy.default and v.dtype == d.dtype) or (
                        op is aten.expand.default and tuple(v.shape) == tuple(d.shape)):
                    continue
                x = graph.call_function(op, (x, *args), kwargs)
                x.meta = {**node.meta, "val": op(v, *args, **kwargs)}
        node.replace_all_uses_with(x)
        graph.erase_node(node)
    graph.lint()
    gm.recompile()


def _freeze(ep, frozen: set) -> None:
    """A parameter the client froze (requires_grad=False: a LoRA base, a frozen encoder) is a
    buffer of the program: state the step reads, with no gradient and no optimizer state."""
    from torch.export.graph_signature import InputKind
    for spec in ep.graph_signature.input_specs:
        if spec.kind == InputKind.PARAMETER and spec.target in frozen:
            spec.kind, spec.persistent = InputKind.BUFFER, True
            ep.state_dict[spec.target] = ep.state_dict[spec.target].detach()


def _check_calls(graph, where: str) -> None:
    bad = set()
    for node in graph.nodes:
        if node.op in ("placeholder", "output"):
            continue
        t = node.target
        if node.op == "call_function" and (t is operator.getitem or (
                isinstance(t, torch._ops.OpOverload) and t.namespace in NAMESPACES)):
            continue
        bad.add(f"{node.op} {t}")
    if bad:
        raise JobError(f"{where}: the program calls what is not an aten or RepOps operator: {sorted(bad)[:8]}. "
                       "Export plain tensor code (no control-flow operators, custom ops or submodules calls)")


@functools.lru_cache(maxsize=4)
def _parsed(data: bytes):
    """The program file as torch's schema dataclasses, once per content in a process: parsing
    costs ~0.8 s for a small LSTM's program (torch's serde asks typing.get_type_hints for every
    object), and one process loads its program for the job's check, its graph, its state and
    its steps. Deserializing reads it without changing it (tests/protocol/test_program_jobs.py)."""
    from torch._export.serde import schema
    from torch._export.serde.serialize import _bytes_to_dataclass
    return _bytes_to_dataclass(schema.ExportedProgram, data)


def load(data: bytes, state: dict, device="cpu", where: str = "model.program") -> torch.nn.Module:
    """The program as a trainable module on `device` (its parameters and buffers are
    `state`'s tensors); .loss(*batch) is its forward. torch.export writes the exporting
    device into every tensor it creates (arange(..., device=cpu)) and every move (.to(cpu)):
    those become `device`."""
    from torch._export.serde.serialize import ExportedProgramDeserializer

    import repops.ops  # noqa: F401  (RepOps' own operators, which a program may call)
    try:
        serialized = _parsed(bytes(data))
    except Exception as e:  # noqa: BLE001 - any parse failure is a malformed file
        raise JobError(f"{where}: not a torch.export program (JSON) that torch {torch.__version__} reads: "
                       f"{type(e).__name__}: {str(e)[:300]}") from None
    params, buffers = set(), set()
    for spec in serialized.graph_module.signature.input_specs:
        if spec.type == "parameter":
            params.add(spec.parameter.parameter_name)
        elif spec.type == "buffer":
            buffers.add(spec.buffer.buffer_name)
        elif spec.type != "user_input":
            raise JobError(f"{where}: the program has a {spec.type} input; only parameters, buffers and the batch "
                           "are allowed")
    missing, extra = sorted((params | buffers) - set(state)), sorted(set(state) - params - buffers)
    if missing or extra:
        raise JobError(f"{where}: init does not hold the program's parameters and buffers: missing {missing[:8]}, "
                       f"unexpected {extra[:8]}")
    state = {k: torch.nn.Parameter(v, requires_grad=v.is_floating_point()) if k in params else v
             for k, v in state.items()}
    try:
        ep = ExportedProgramDeserializer().deserialize(serialized, state, {}, None)
    except Exception as e:  # noqa: BLE001
        raise JobError(f"{where}: torch cannot rebuild the program: {type(e).__name__}: {str(e)[:300]}") from None
    _check_calls(ep.graph, where)
    here = torch.device(device)
    for node in ep.graph.nodes:  # positional too: aten.to.device(x, device(cpu), dtype) (an HF mask's .to)
        node.args = tuple(here if isinstance(a, torch.device) else a for a in node.args)
        node.kwargs = {k: here if isinstance(v, torch.device) else v for k, v in node.kwargs.items()}
    module = ep.module()
    module.loss = lambda *batch: module(*batch)
    return module
