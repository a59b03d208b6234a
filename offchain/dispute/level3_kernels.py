"""Level 3: the primitive kernels of the disputed operator's decomposition (oprun.py).

Both parties re-run the operator on its (agreed) inputs and commit to the kernel sequence;
Merkle descent finds the first differing kernel k. Then, as at level 2:
- Case 1, the kernel's name or operand descriptors differ: the referee re-runs the
  operator's decomposition itself (structure only decides) and the party that differs loses;
- Case 2, an operand differs: level 4 finds the first differing element; its source (a
  view of an op input or of an earlier, agreed kernel output; or a constant) is proven,
  and the party whose element is not the source's loses;
- Case 3, same operands, different outputs: level 4 finds the element, level 5 executes
  the one primitive.
The last leaf ("result") has the op's outputs as operands: they must be the node outputs
each party committed at level 2 and views of agreed kernel outputs."""
from __future__ import annotations


from ..protocol import merkle
from ..protocol.tensors import commit, header
from . import level4_elements, level5_primitive
from .engine import descend
from .level2_nodes import Case3
from .oprun import MAT, RESULT, OpRun, decode_kernel, element_of, operand_shape
from .party import Lost, Party

LEVEL = 3


def _kernel(p: Party, case: Case3, k: int, leaf: bytes):
    enc = p.ask(LEVEL, "kernel", case.step, case.node, k)
    if not isinstance(enc, (bytes, bytearray)) or merkle.leaf_hash(bytes(enc)) != leaf:
        raise Lost(p, LEVEL, f"kernel {k}'s encoding does not hash to the leaf it revealed")
    try:
        return decode_kernel(bytes(enc))
    except (ValueError, IndexError, KeyError, UnicodeDecodeError) as e:
        raise Lost(p, LEVEL, f"kernel {k} is malformed: {e}") from None


def _referee_run(ctx, case: Case3, p: Party, keep=None):
    """The referee's own decomposition (Case 1, MAT operands): the op's inputs fetched from
    party p, which loses if they are not the agreed ones. Deciding uses the structure (or
    data movement), never its floats."""
    ins = p.ask(LEVEL, "op_inputs", case.step, case.node)
    if len(ins) != len(case.inputs) or any(commit(t, ctx.job.spec.chunk) != c for t, c in zip(ins, case.inputs)):
        raise Lost(p, LEVEL, "the operator inputs it sent are not the agreed ones")
    return OpRun(case.structure, ins, ctx.job.spec.chunk).kernels(keep=keep)


def play(ctx, a: Party, b: Party, case: Case3):
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
        return losers, LEVEL
    n = counts[0]
    roots = []
    for p in (a, b):
        top = p.hash32(LEVEL, p.ask(LEVEL, "kernel_node", s, j, merkle.depth(n), 0), "kernel top")
        roots.append(merkle.seal(n, top))
    if roots[0] == roots[1]:
        # the same decomposition: only the result (the op's outputs as committed at level 2)
        # can differ; it is the last leaf
        k = n - 1
        ka, kb = (_proven_kernel(p, case, k, r, n) for p, r in zip((a, b), roots))
    else:
        k, leaves = descend(LEVEL, a, b, n, tuple(roots), "kernel_node", s, j)
        if k >= n:
            return [p for p, leaf in zip((a, b), leaves) if leaf != merkle.ZERO], LEVEL
        ka, kb = _kernel(a, case, k, leaves[0]), _kernel(b, case, k, leaves[1])
    # the result pseudo-kernel must carry the outputs committed at level 2
    for p, kk in ((a, ka), (b, kb)):
        if kk[0] == RESULT and kk[2] != list(case.outputs[p.name]):
            p.reason = f"the outputs of its decomposition of node {j} are not the node outputs it committed"
            return [p], LEVEL
    # Case 1: structure
    if ka[0] != kb[0] or ka[1] != kb[1] or (k == n - 1) != (ka[0] == RESULT):
        true = _referee_run(ctx, case, a)[k]
        losers = [p for p, kk in ((a, ka), (b, kb)) if (kk[0], kk[1]) != (true.name, true.descriptors)]
        for p in losers:
            p.reason = f"kernel {k} of node {j} is not the decomposition's (Case 1 at level 3)"
        return losers, LEVEL
    name, descs = ka[0], ka[1]
    m = len(case.inputs)
    # Case 2: an operand
    for o, (ca, cb) in enumerate(zip(ka[2], kb[2])):
        if ca == cb:
            continue
        d = descs[o]
        if d[0] == MAT:
            true = _referee_run(ctx, case, a, keep=k)[k]
            truth = true.operands[o] if true.operands else commit(true.arrays[o], chunk)
            losers = [p for p, c in ((a, ca), (b, cb)) if c != truth]
        else:
            expected = header(level5_primitive.operand_code(name, o), operand_shape(d))
            flat, elems = level4_elements.first_difference(a, b, (ca, cb), (s, j, k, ("operand", o)), chunk, expected)
            src = element_of(d, flat)
            if src[0] == "const":
                truth_el = src[1]
            else:
                source, index = src[1], src[2]
                if source < m:
                    src_commit = case.inputs[source]
                elif source - m < k:
                    src_commit = _proven_kernel(a, case, source - m, roots[0], n)[3]
                else:
                    raise Lost(a, LEVEL, f"operand {o} of kernel {k} reads kernel {source - m}, not an earlier one")
                proof = a.ask(LEVEL, "element", s, j, k, ("source", source), index)
                if not proof.verify(src_commit) or proof.index != index:
                    raise Lost(a, LEVEL, f"its proof of source {source} element {index} does not verify")
                truth_el = proof.element()
            losers = [p for p in (a, b) if elems[p.name] != truth_el]
        for p in losers:
            p.reason = f"operand {o} of kernel {k} ({name}) of node {j} is not what its source holds (Case 2)"
        return losers, level4_elements.LEVEL
    # Case 3: the primitive itself
    shapes = [level4_elements.opened_shape(a, ka[2][o], (s, j, k, ("operand", o))) if d[0] == MAT
              else operand_shape(d) for o, d in enumerate(descs)]
    out_shape = level5_primitive.output_shape(name, shapes)
    out_code = level5_primitive.result_code(name)
    flat, elems = level4_elements.first_difference(a, b, (ka[3], kb[3]), (s, j, k, ("output",)), chunk,
                                                   header(out_code, out_shape))

    def fetch(o, idx):
        """Operand o's element idx, proven against the agreed commitment (either party)."""
        for p, kk in ((a, ka), (b, kb)):
            proof = p.ask(level5_primitive.LEVEL, "element", s, j, k, ("operand", o), idx)
            if proof.verify(kk[2][o]) and proof.index == idx:
                return proof.element(), proof.code
        raise Lost(b, level5_primitive.LEVEL, f"no valid proof of operand {o} element {idx}")
    result, words = level5_primitive.evaluate(name, shapes, flat, fetch)
    losers, _ = level5_primitive.judge(name, result, words, elems, (a, b), out_code)
    return losers, level5_primitive.LEVEL


def _proven_kernel(p: Party, case: Case3, k: int, root: bytes, n: int):
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
