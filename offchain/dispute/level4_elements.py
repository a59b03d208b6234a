"""Level 4: the elements of one tensor the parties committed to differently (level 3's
TensorDisputed: a kernel's output, or an operand they disagree on). Each party opens its
commitment into (header, chunk tree root); Merkle descent over the chunks finds the first
differing chunk, whose bytes both reveal; the first differing element in it is the
disputed one. An operand element is decided here, against its source's element (proven);
an output element goes on to level 5 as ElementFound."""
from __future__ import annotations

from dataclasses import dataclass

from ..protocol import merkle
from ..protocol.tensors import CODES, chunk_count, header, parse_header
from .engine import descend
from .kernels import operand_code, output_shape, result_code
from .level3_kernels import TensorDisputed
from .oprun import MAT, element_of, operand_shape
from .party import Lost, Party

LEVEL = 4


@dataclass
class ElementFound:
    """Level 4's hand-off to level 5: output element `flat` of kernel (step, node, kernel)."""
    where: tuple                # (step, node, kernel)
    name: str
    shapes: list                # operand shapes
    flat: int
    elements: dict              # party name -> its element bytes
    operands: list              # the agreed operand commitments


def _open(p: Party, commitment: bytes, where: tuple, expected: bytes):
    got = p.ask(LEVEL, "tensor_root", *where)
    try:
        head, root = got
        head, root = bytes(head), p.hash32(LEVEL, root, "chunk root")
    except (TypeError, ValueError):
        raise Lost(p, LEVEL, "tensor_root is not (header, root)") from None
    if merkle.sha256(head, root) != commitment:
        raise Lost(p, LEVEL, f"its opening of {where} does not hash to its commitment")
    if head != expected:
        raise Lost(p, LEVEL, f"{where} does not have the dtype and shape the kernel implies")
    return head, root


def opened_shape(p: Party, commitment: bytes, where: tuple) -> tuple:
    """The shape of a tensor whose commitment the parties agree on, from p's opening (a
    MAT operand: its descriptor does not carry it)."""
    got = p.ask(LEVEL, "tensor_root", *where)
    try:
        head, root = bytes(got[0]), p.hash32(LEVEL, got[1], "chunk root")
        if merkle.sha256(head, root) != commitment:
            raise ValueError("opening does not hash to the commitment")
        return parse_header(head)[1]
    except (TypeError, ValueError, IndexError) as e:
        raise Lost(p, LEVEL, f"its opening of {where} is not valid: {e}") from None


def first_difference(a: Party, b: Party, commitments: tuple[bytes, bytes], where: tuple, chunk: int,
                     expected: bytes) -> tuple[int, dict]:
    """expected: the tensor header (dtype, shape) the kernel implies; a party whose tensor
    has another one loses. -> (flat index of the first differing element, {party name: its
    element bytes})."""
    (ha, ra), (hb, rb) = (_open(p, c, where, expected) for p, c in zip((a, b), commitments))
    code, shape = parse_header(ha)
    nchunks = chunk_count(shape, chunk)
    if nchunks == 0:  # no chunk to open: an empty tensor's one commitment has the empty tree's top
        empty = merkle.seal(0, merkle.ZERO)
        raise Lost(a if ra != empty else b, LEVEL, "its empty tensor's chunk tree is not the empty one")
    c, leaves = descend(LEVEL, a, b, nchunks, (ra, rb), "tensor_node", *where)
    if c >= nchunks:  # past the last chunk: only padding (ZERO) may be there, as levels 2-3 and the chain rule
        raise Lost(a if leaves[0] != merkle.ZERO else b, LEVEL, "its chunk tree's padding is not ZERO")
    size = CODES[code].itemsize
    chunks = {p.name: p.element_proof(LEVEL, merkle.sha256(ha, root), c * chunk, chunk, *where).chunk_bytes
              for p, root in ((a, ra), (b, rb))}
    ba, bb = chunks[a.name], chunks[b.name]
    # both chunks verified at index c under the same header and chunk size, and the descent
    # found different leaves there: they differ (short of a sha256 collision)
    e = next(i for i in range(len(ba) // size) if ba[i * size:(i + 1) * size] != bb[i * size:(i + 1) * size])
    return c * chunk + e, {p.name: chunks[p.name][e * size:(e + 1) * size] for p in (a, b)}


def play(ctx, a: Party, b: Party, t: TensorDisputed) -> list[Party] | ElementFound:
    s, j, k, chunk = t.step, t.node, t.kernel, ctx.job.spec.chunk
    where = (s, j, k, t.which)
    if t.which[0] == "operand":  # Case 2: the element must be what its source holds
        o = t.which[1]
        d = t.descriptors[o]
        expected = header(operand_code(t.name, o), operand_shape(d))
        flat, elems = first_difference(a, b, t.commitments, where, chunk, expected)
        src = element_of(d, flat)
        if src[0] == "const":
            truth = src[1]
        else:
            source, index = src[1], src[2]
            truth = a.element_proof(LEVEL, t.sources[source], index, chunk, s, j, k, ("source", source)).element()
        losers = [p for p in (a, b) if elems[p.name] != truth]
        for p in losers:
            p.reason = f"operand {o} of kernel {k} ({t.name}) of node {j} is not what its source holds (Case 2)"
        return losers
    # Case 3: the output element goes to level 5 with the operands' shapes
    shapes = [opened_shape(a, t.operands[o], (s, j, k, ("operand", o))) if d[0] == MAT else operand_shape(d)
              for o, d in enumerate(t.descriptors)]
    if t.which[0] == "fault":  # the element is named by the fault itself: no chunk to open
        _, flat, says = t.which
        return ElementFound((s, j, k), t.name, shapes, flat, {p: bytes([w]) for p, w in says.items()}, t.operands)
    expected = header(result_code(t.name), output_shape(t.name, shapes))
    flat, elems = first_difference(a, b, t.commitments, where, chunk, expected)
    return ElementFound((s, j, k), t.name, shapes, flat, elems, t.operands)
