"""Constant folding of an exported program, at export (the client's side): every value the
program computes from nothing but its own constants (positions from `arange`, causal and
packed-sequence masks, rotary tables: what Hugging Face models build from shapes) is computed
once, under RepOps, and becomes a buffer in the job's init. Why: such nodes would run on
every step, and the integer ones cannot be settled on chain (the referee's soft-float has no
int64 primitives); as state tensors they are agreed from S_0 instead. Views of constants stay
in the graph (a view is free to describe, and folding an `expand` would store its copies).
Constants are the program's lifted tensors and the buffers nothing writes; a `no_grad` or
`autocast(enabled=False)` block over constants (Llama's rotary table) is folded like an op.
So is Python's arithmetic on sizes and numbers read from constants (Funnel's relative
positions: torch.arange(t0, t1, -s) of 0-d tensors, whose sizes torch.export writes as
`item`, `sym_size`, `<=`, `-` nodes): its value is written into the nodes that read it, and
torch.export's runtime asserts on it are checked once, here. docs/PROTOCOL.md §5."""
from __future__ import annotations

import operator

import torch
from torch.export.graph_signature import InputKind, InputSpec, TensorArgument

PREFIX = "folded_"


def _grad_mode_block(enabled, body, *args):
    with torch.set_grad_enabled(enabled):
        return body(*args)


def _autocast_block(device_type, dtype, enabled, cache_enabled, body, *args):
    return body(*args)  # only autocast(enabled=False) is folded (_pure)


# torch.export's wrappers of a Python `with` block, as the eager calls they stand for
_BLOCKS = {"wrap_with_set_grad_enabled": _grad_mode_block, "wrap_with_autocast": _autocast_block}


def _sym_ops() -> frozenset:
    """Python's arithmetic on sizes and numbers as torch.export writes it (operator.sub, le, ...,
    torch.sym_max): its serializer's own list."""
    from torch._export.serde.serialize import _SYM_OPS
    return frozenset(_SYM_OPS)


def _op(node):
    return _BLOCKS.get(getattr(node.target, "__name__", None)) if isinstance(
        node.target, torch._ops.HigherOrderOperator) else node.target


def _mutable(node) -> bool:
    return isinstance(node.target, torch._ops.OpOverload) and node.target._schema.is_mutable


def _writes(node):
    """The nodes an in-place op writes."""
    return [a for arg, a in zip(node.target._schema.arguments, node.args)
            if arg.alias_info is not None and arg.alias_info.is_write and isinstance(a, torch.fx.Node)]


def _private_write(node) -> bool:
    """An in-place op on a tensor the program made and nothing else reads (`buckets += ...`:
    the tracer hands later reads the op's own result): as pure as its out-of-place form. A
    write to an input (a buffer: batch norm's statistics) is state, never folded."""
    return all(a.op == "call_function" and len(a.users) == 1 and not _view(a) for a in _writes(node))


def _pure(node) -> bool:
    t = node.target
    return node.op == "call_function" and (t is operator.getitem or (
        isinstance(t, torch._ops.OpOverload) and t.namespace in ("aten", "repops")
        and torch.Tag.nondeterministic_seeded not in t.tags and (not _mutable(node) or _private_write(node)))
        or isinstance(t, torch._ops.HigherOrderOperator) and t.__name__ in _BLOCKS
        and (t.__name__ != "wrap_with_autocast" or node.args[2] is False)
        or t in _sym_ops())


def _schema_returns(node):
    t = node.target
    return t._schema.returns if isinstance(t, torch._ops.OpOverload) else None


def _view(node) -> bool:
    """A view of its input (an in-place op's result is the written tensor itself, not a view)."""
    return not _mutable(node) and any(r.alias_info is not None for r in _schema_returns(node) or ())


def _returns_nothing(node) -> bool:
    return _schema_returns(node) == []


def fold(ep: torch.export.ExportedProgram, keep: set = frozenset()) -> dict[str, torch.Tensor]:
    """Folds `ep` in place; returns the new constants by name (also added to ep.constants as
    lifted tensor constants, which program.export turns into buffers). keep: buffers that stay
    in the program even when the folded graph no longer reads them (the client's state_dict,
    delivered back to it)."""
    graph = ep.graph_module.graph
    env, constant = _constants(ep)
    folded = {n for n in constant if n.op == "call_function" and not _view(n)}
    kept = _written_at_run(graph, folded)
    frontier = [n for n in graph.nodes if n in folded and not _returns_nothing(n) and n not in kept
                and any(u not in folded for u in n.users)]
    lifted = _Lifted(ep)
    for node in frontier:
        value = env[node]
        if isinstance(value, torch.Tensor):  # (a tuple read by anything but getitem stays computed)
            node.replace_all_uses_with(lifted.use(node, value.detach(), constant))
        elif type(value) in (int, float, bool):  # a size or number from constants: written where it is read
            _write_number(node, value)
    for node in reversed(list(graph.nodes)):  # what the lifted values replaced, and views left unused
        if node in constant and node.op in ("call_function", "get_attr") and (_returns_nothing(node) or not node.users):
            graph.erase_node(node)
    _drop_unused_inputs(ep, keep)
    _static_shapes(ep)
    ep.graph_module.recompile()
    return lifted.new


def _write_number(node, value) -> None:
    """A size or number folded to `value`: written into the nodes that read `node`."""
    for user in list(node.users):
        user.args, user.kwargs = torch.fx.node.map_arg((user.args, user.kwargs),
                                                       lambda a: value if a is node else a)


def _check_scalar(args, what: str) -> None:
    """torch.export's runtime assertion (aten._assert_scalar) on a folded number, checked once here."""
    if not args[0]:
        from .job import JobError
        raise JobError(f"the model's {what} fail torch.export's check: {args[1]}")


def _static_shapes(ep) -> None:
    """A shape torch.export wrote with a number read from a tensor (an unbacked symbol: Funnel's
    arange(t0, t1, -s)) is a plain size once that number is folded. Where no node of the folded
    graph reads a number from a tensor any more, every node's example value is computed again
    from its operands' (a fresh fake mode, static shapes), each remaining size or number (a
    `sym_size`, Python's `-` or `<=` on it) is written where it is read, torch.export's
    assertions on them are checked here, and the symbols leave the range constraints. Where one
    still does (a number read from the batch), the program stays as torch.export wrote it."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols
    graph = ep.graph_module.graph
    if not any(free_unbacked_symbols(n.meta.get("val")) for n in graph.nodes):
        return
    mode, env = FakeTensorMode(), {}
    remake = lambda v: mode.from_tensor(v, static_shapes=True) if isinstance(v, torch.Tensor) else v  # noqa: E731
    try:
        with mode:
            for node in graph.nodes:
                if node.op in ("placeholder", "get_attr"):
                    env[node] = torch.utils._pytree.tree_map(remake, node.meta.get("val"))
                elif node.op == "call_function":
                    args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs), lambda a: env[a])
                    if node.target is torch.ops.aten._assert_scalar.default:
                        if not isinstance(args[0], bool):
                            return
                        _check_scalar(args, "shapes")
                        env[node] = None
                    else:
                        env[node] = _op(node)(*args, **kwargs)
    except (torch._subclasses.fake_tensor.DataDependentOutputException,
            torch.fx.experimental.symbolic_shapes.GuardOnDataDependentSymNode):
        return  # (a number still read from a tensor)
    if any(free_unbacked_symbols(v) for v in env.values()):
        return
    for node in list(graph.nodes):
        if node.op != "call_function":
            continue
        value = env[node]
        if node.target is torch.ops.aten._assert_scalar.default:
            graph.erase_node(node)
        elif type(value) in (int, float, bool):
            _write_number(node, value)
        else:
            node.meta["val"] = value
            node.meta.pop("unbacked_bindings", None)
    for node in reversed(list(graph.nodes)):
        if node.op == "call_function" and type(env[node]) in (int, float, bool) and not node.users:
            graph.erase_node(node)
    for sym in [s for s in ep.range_constraints if free_unbacked_symbols(s)]:
        del ep._range_constraints[sym]


def _constants(ep) -> tuple[dict, set]:
    """(value of every constant node, evaluated under RepOps; the set of constant nodes)."""
    import repops
    graph, specs = ep.graph_module.graph, ep.graph_signature.input_specs
    written, mutated = _written(graph), set(ep.graph_signature.buffers_to_mutate.values())
    env: dict = {}
    for n, s in zip([n for n in graph.nodes if n.op == "placeholder"], specs):
        if s.kind == InputKind.CONSTANT_TENSOR:
            env[n] = ep.constants[s.target]
        elif s.kind == InputKind.BUFFER and s.target not in mutated and n not in written:
            env[n] = ep.state_dict[s.target] if s.target in ep.state_dict else ep.constants[s.target]
    env.update({n: getattr(ep.graph_module, n.target) for n in graph.nodes if n.op == "get_attr"})
    constant = set(env)
    for node in graph.nodes:
        if _pure(node) and node not in written and all(a in constant for a in node.all_input_nodes):
            constant.add(node)
    load = lambda a: env[a] if isinstance(a, torch.fx.Node) else a  # noqa: E731
    with repops.deterministic():
        for node in [n for n in graph.nodes if n in constant and n.op == "call_function"]:
            for a in _writes(node) if _mutable(node) else ():
                env[a] = env[a].clone()  # (never write a state tensor or a lifted constant)
            args, kwargs = torch.fx.node.map_aggregate((node.args, node.kwargs), load)
            if node.target is torch.ops.aten._assert_scalar.default:  # torch.export's check of a folded number
                _check_scalar(args, "constants")
                env[node] = None
                continue
            env[node] = _op(node)(*args, **kwargs)
    return env, constant


class _Lifted:
    """The program's new constant inputs, one per distinct (compacted) value."""

    def __init__(self, ep):
        self.ep, self.new, self._seen = ep, {}, {}
        specs = ep.graph_signature.input_specs
        self._at = next(i for i, s in enumerate(specs) if s.kind == InputKind.USER_INPUT)
        self._first_input = [n for n in ep.graph_module.graph.nodes if n.op == "placeholder"][self._at]

    def use(self, node, value: torch.Tensor, constant: set):
        """The node that stands for `value` where `node` was read: its placeholder, expanded
        back when compacted (the expand is added to `constant`: erased if unused). A value
        with no elements (Hugging Face's empty cache, `torch.tensor([])`) is stored as one
        element and sliced to nothing in the graph: a state tensor of 0 elements could not
        answer a delivery challenge (docs/PROTOCOL.md §6)."""
        graph, fake = self.ep.graph_module.graph, node.meta["val"]
        small = _compact(value) if value.numel() else torch.zeros([1] * value.dim(), dtype=value.dtype)
        key = (small.dtype, tuple(small.shape), small.numpy().tobytes())
        if key not in self._seen:  # the same table computed again (per layer): one buffer
            with graph.inserting_before(self._first_input):
                p = self._seen[key] = graph.placeholder(f"{PREFIX}{len(self.new)}")
            p.meta["val"] = fake.fake_mode.from_tensor(small, static_shapes=True)
            self.ep.graph_signature.input_specs.insert(self._at, InputSpec(
                kind=InputKind.CONSTANT_TENSOR, arg=TensorArgument(name=p.name), target=p.name))
            self._at += 1
            self.ep.constants[p.name] = self.new[p.name] = small
        p = self._seen[key]
        if not value.numel():
            empty = list(value.shape).index(0)
            with graph.inserting_after(node):
                p = graph.call_function(torch.ops.aten.slice.Tensor, (p, empty, 0, 0))
            p.meta["val"] = fake.fake_mode.from_tensor(small.narrow(empty, 0, 0), static_shapes=True)
            constant.add(p)
            node = p
        if tuple(p.meta["val"].shape) != tuple(value.shape):
            with graph.inserting_after(node):
                p = graph.call_function(torch.ops.aten.expand.default, (p, list(value.shape)))
            p.meta["val"] = fake
            constant.add(p)
        return p


def _written(graph) -> set:
    """The nodes whose tensor an in-place op writes (directly or through views): their value
    is not the same all step, so neither they nor anything computed from them is folded."""
    return _written_by(graph, lambda node: not _private_write(node))


def _written_at_run(graph, folded: set) -> set:
    """Constant nodes an unfolded in-place op writes (`torch.empty(n).bernoulli_(p)`: a private
    write of a draw): they stay computed in the graph, since a lifted constant is a compacted,
    expanded view that is never written."""
    return _written_by(graph, lambda node: node not in folded)


def _written_by(graph, counts) -> set:
    """The nodes (and the bases of the views) that the in-place ops `counts` admits write."""
    out = set()
    for node in graph.nodes:
        if node.op != "call_function" or not _mutable(node) or not counts(node):
            continue
        for a in _writes(node):
            while isinstance(a, torch.fx.Node):
                out.add(a)
                a = a.args[0] if a.op == "call_function" and _view(a) and a.args else None
    return out


def _compact(value: torch.Tensor) -> torch.Tensor:
    """The value with every axis along which it repeats (bit for bit) cut to size 1: a mask
    built per batch row, a table repeated per head, is stored once and expanded in the graph."""
    bits = value.view({2: torch.int16, 4: torch.int32, 8: torch.int64}[value.element_size()]) \
        if value.is_floating_point() else value
    for d in range(value.dim()):
        if bits.shape[d] > 1 and torch.equal(bits, bits.narrow(d, 0, 1).expand_as(bits)):
            bits = bits.narrow(d, 0, 1)
    return bits.view(value.dtype).contiguous().clone() if value.is_floating_point() else bits.contiguous().clone()


def _drop_unused_inputs(ep, keep: set) -> None:
    """Constants and buffers the folded graph no longer reads leave the program (and init),
    but those in `keep`."""
    graph, specs = ep.graph_module.graph, ep.graph_signature.input_specs
    mutated = set(ep.graph_signature.buffers_to_mutate.values())
    for node, spec in list(zip([n for n in graph.nodes if n.op == "placeholder"], list(specs))):
        if node.users or spec.target in keep or not (spec.kind == InputKind.CONSTANT_TENSOR or
                              spec.kind == InputKind.BUFFER and spec.target not in mutated):
            continue
        graph.erase_node(node)
        specs.remove(spec)
        ep.constants.pop(spec.target, None)  # non-persistent buffers live there too
        ep.state_dict.pop(spec.target, None)
