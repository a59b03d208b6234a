"""Level 3: the primitive kernels of the disputed operator's decomposition (oprun.py).

Both parties re-run the operator on its (agreed) inputs and commit to the kernel sequence;
Merkle descent finds the first differing kernel k. Then, as at level 2:
- Case 1, the kernel's name or operand descriptors differ: the referee re-runs the
  operator's decomposition itself (structure only decides) and the party that differs loses;
- Case 2, an operand differs: decided here for a MAT operand (the referee's own run), else
  handed to level 4 with every source its descriptor may read (an op input, or an earlier,
  agreed kernel's output, proven here);
- Case 3, same operands, different outputs: handed to level 4 (then level 5).
The last leaf ("result") has the op's outputs as operands: they must be the node outputs
each party committed at level 2 and views of agreed kernel outputs.
A fault node (level 2) says where its decomposition faults: kernel k (a `fault.bool`) whose
output commitment is FAULT(e), ZERO after it. At the first differing kernel, a party whose
leaf is ZERO shows its faulting kernel before it (the other agreed with it and went on, and
loses); a party whose faulting kernel it is hands level 5 element e (the smaller e when both
fault there), where the referee checks the rule in one step. Starts from level 2's
NodeFound; hands level 4 a TensorDisputed."""
from __future__ import annotations

from dataclasses import dataclass

from ..protocol import merkle
from ..protocol.tensors import commit
from .engine import descend
from .level2_nodes import NodeFound
from .oprun import CAT, FAULT_KERNEL, MAT, RESULT, VIEW, OpRun, decode_kernel, fault_output, pieces
from .party import Lost, Party

LEVEL = 3


@dataclass
class TensorDisputed:
    """Kernel k of node j at step s, and which of its tensors differs: ("operand", o),
    ("output",), or ("fault", element, {party name: 1 if it says the kernel faults there})."""
    step: int
    node: int
    kernel: int
    which: tuple
    commitments: tuple          # (party a's, party b's)
    name: str                   # the kernel
    descriptors: list           # its operand descriptors
    operands: list              # its operand commitments (agreed when the output is disputed)
    sources: dict               # source index -> commitment: what the disputed operand may read


def _kernel(p: Party, case: NodeFound, k: int, leaf: bytes):
    enc = p.ask(LEVEL, "kernel", case.step, case.node, k)
    if not isinstance(enc, (bytes, bytearray)) or merkle.leaf_hash(bytes(enc)) != leaf:
        raise Lost(p, LEVEL, f"kernel {k}'s encoding does not hash to the leaf it revealed")
    try:
        return decode_kernel(bytes(enc))
    except (ValueError, IndexError, KeyError, UnicodeDecodeError) as e:
        raise Lost(p, LEVEL, f"kernel {k} is malformed: {e}") from None


def _proven_kernel(p: Party, case: NodeFound, k: int, root: bytes, n: int):
    """Kernel k of party p, proven against its kernel root (for a kernel before the
    disputed one the two trees agree, so either party's proof gives the agreed kernel)."""
    enc = bytes(p.ask(LEVEL, "kernel", case.step, case.node, k))
    proof = p.ask(LEVEL, "kernel_proof", case.step, case.node, k)
    if not merkle.verify(root, n, k, merkle.leaf_hash(enc), [bytes(x) for x in proof]):
        raise Lost(p, LEVEL, f"kernel {k}'s proof does not verify against its kernel root")
    try:
        return decode_kernel(enc)
    except (ValueError, IndexError, KeyError, UnicodeDecodeError) as e:
        raise Lost(p, LEVEL, f"kernel {k} is malformed: {e}") from None


def _referee_run(ctx, case: NodeFound, p: Party, keep=None):
    """The referee's own decomposition (Case 1, MAT operands): the op's inputs fetched from
    party p, which loses if they are not the agreed ones. Deciding uses the structure (or
    data movement), never its floats."""
    ins = p.ask(LEVEL, "op_inputs", case.step, case.node)
    if len(ins) != len(case.inputs) or any(commit(t, ctx.job.spec.chunk) != c for t, c in zip(ins, case.inputs)):
        raise Lost(p, LEVEL, "the operator inputs it sent are not the agreed ones")
    return OpRun(case.structure, ins, ctx.job.spec.chunk).kernels(keep=keep)


def _read_sources(descriptor: bytes) -> set[int]:
    """The sources (op inputs, kernel outputs) an operand descriptor reads."""
    if descriptor[0] == VIEW:
        return {int.from_bytes(descriptor[1:3], "big")}
    if descriptor[0] == CAT:
        return set().union(*(_read_sources(sub) for _, _, _, sub in pieces(descriptor)[2]))
    return set()


def _fault(case: NodeFound, p: Party):
    """(kernel, element) where party p's node faults, or None."""
    out = case.outputs[p.name]
    return out if isinstance(out, tuple) else None


def _fault_kernel_shown(x: Party, other: Party, case: NodeFound, root: bytes, n: int, before: int) -> list[Party]:
    """x's tree holds nothing at the disputed kernel: x shows its faulting kernel (where its
    node says, before `before`, with output FAULT(e)), proven in its tree; then the other agreed
    with a decomposition that faults there and went on, and loses. Else x loses."""
    where = _fault(case, x)
    try:
        k, enc, proof = x.ask(LEVEL, "fault_kernel", case.step, case.node)
        k, enc, proof = int(k), bytes(enc), [x.hash32(LEVEL, p, "proof") for p in proof]
        kern = decode_kernel(enc)
        ok = (where is not None and k == where[0] < before and kern[0] == FAULT_KERNEL
              and kern[3] == fault_output(where[1]) and merkle.verify(root, n, k, merkle.leaf_hash(enc), proof))
    except (TypeError, ValueError, IndexError, KeyError, UnicodeDecodeError):
        ok = False
    if not ok:
        x.reason = f"its decomposition of node {case.node} has no faulting kernel before kernel {before}, as its node says"
        return [x]
    other.reason = f"it agreed with a decomposition of node {case.node} that faults at kernel {k}, and went on from there"
    return [other]


def play(ctx, a: Party, b: Party, case: NodeFound) -> list[Party] | TensorDisputed:
    s, j, chunk = case.step, case.node, ctx.job.spec.chunk
    counts = []
    for p in (a, b):
        n = p.ask(LEVEL, "kernel_count", s, j)
        if not isinstance(n, int) or n < 1:
            raise Lost(p, LEVEL, "kernel_count is not a positive integer")
        counts.append(n)
    if counts[0] != counts[1]:
        truth = len(_referee_run(ctx, case, a))
        losers = []
        for p, n in zip((a, b), counts):
            if n != truth:
                p.reason = f"node {j} decomposes into {truth} kernels, it claimed {n} (Case 1 at level 3)"
                losers.append(p)
        return losers
    n = counts[0]
    roots = []
    for p in (a, b):
        top = p.hash32(LEVEL, p.ask(LEVEL, "kernel_node", s, j, merkle.depth(n), 0), "kernel top")
        roots.append(merkle.seal(n, top))
    if roots[0] == roots[1]:
        # the same decomposition: only the result (the op's outputs as committed at level 2)
        # can differ; it is the last leaf (a fault node has none: it shows its fault instead)
        for x, other, root in ((a, b, roots[0]), (b, a, roots[1])):
            if _fault(case, x) is not None:
                return _fault_kernel_shown(x, other, case, root, n, n)
        k = n - 1
        ka, kb = (_proven_kernel(p, case, k, r, n) for p, r in zip((a, b), roots))
    else:
        k, leaves = descend(LEVEL, a, b, n, tuple(roots), "kernel_node", s, j)
        if k >= n:
            return [p for p, leaf in zip((a, b), leaves) if leaf != merkle.ZERO]
        for x, leaf, other, root in ((a, leaves[0], b, roots[0]), (b, leaves[1], a, roots[1])):
            if leaf == merkle.ZERO:
                return _fault_kernel_shown(x, other, case, root, n, k)
        ka, kb = _kernel(a, case, k, leaves[0]), _kernel(b, case, k, leaves[1])
    # the result pseudo-kernel must carry the outputs committed at level 2
    for p, kk in ((a, ka), (b, kb)):
        if kk[0] == RESULT and kk[2] != list(case.outputs[p.name]):
            p.reason = f"the outputs of its decomposition of node {j} are not the node outputs it committed"
            return [p]
    # Case 1: structure
    if ka[0] != kb[0] or ka[1] != kb[1] or (k == n - 1) != (ka[0] == RESULT):
        true = _referee_run(ctx, case, a)[k]
        losers = [p for p, kk in ((a, ka), (b, kb)) if (kk[0], kk[1]) != (true.name, true.descriptors)]
        for p in losers:
            p.reason = f"kernel {k} of node {j} is not the decomposition's (Case 1 at level 3)"
        return losers
    name, descs = ka[0], ka[1]
    m = len(case.inputs)
    # Case 2: an operand
    for o, (ca, cb) in enumerate(zip(ka[2], kb[2])):
        if ca == cb:
            continue
        d = descs[o]
        if d[0] == MAT:  # the referee's own run decides
            true = _referee_run(ctx, case, a, keep=k)[k]
            truth = true.operands[o] if true.operands else commit(true.arrays[o], chunk)
            losers = [p for p, c in ((a, ca), (b, cb)) if c != truth]
            for p in losers:
                p.reason = f"operand {o} of kernel {k} ({name}) of node {j} is not what its source holds (Case 2)"
            return losers
        sources = {}
        for src in _read_sources(d):
            if src < m:
                sources[src] = case.inputs[src]
            elif src - m < k:
                sources[src] = _proven_kernel(a, case, src - m, roots[0], n)[3]
            else:
                raise Lost(a, LEVEL, f"operand {o} of kernel {k} reads kernel {src - m}, not an earlier one")
        return TensorDisputed(s, j, k, ("operand", o), (ca, cb), name, descs, ka[2], sources)
    # a fault where the party's node says, at a fault kernel: level 5 checks the rule at the
    # smaller element (the other says the kernel does not fault there: a value, or a later fault)
    faulting = {p.name: f[1] for p, kk in ((a, ka), (b, kb))
                if (f := _fault(case, p)) is not None and f[0] == k and name == FAULT_KERNEL and kk[3] == fault_output(f[1])}
    if faulting:
        flat = min(faulting.values())
        return TensorDisputed(s, j, k, ("fault", flat, {p.name: int(faulting.get(p.name) == flat) for p in (a, b)}),
                              (ka[3], kb[3]), name, descs, ka[2], {})
    # Case 3: the primitive itself
    return TensorDisputed(s, j, k, ("output",), (ka[3], kb[3]), name, descs, ka[2], {})
