"""Level 5: one binary32 primitive. The disputed output element's operands are proven by
Merkle proofs against the (agreed) operand commitments, the referee executes the
primitive with the soft-float (offchain/softfloat/float32.py; on chain Float32.sol) on their
bits, and the party whose element differs from the result loses. Starts from level 4's
ElementFound."""
from __future__ import annotations

import numpy as np

from ..softfloat import float32 as sf
from ..softfloat import integers as si
from .kernels import INDEX_OPERAND, RANDOM, operand_index, output_shape, primitive_word, result_code, word
from .level4_elements import ElementFound
from .party import Lost, Party

LEVEL = 5


def evaluate(name: str, shapes: list, flat: int, fetch) -> tuple[int, list]:
    """Output element `flat` of a kernel from its operand elements; fetch(operand, index)
    -> (element bytes, dtype code) proves one. -> (the result's word, the words read)."""
    out = output_shape(name, shapes)
    if flat >= int(np.prod(out, dtype=object)):  # an element the kernel does not have (a fault claimed
        return 0, []                             # past its output): nothing there faults (Executor.truth)
    if name in INDEX_OPERAND:
        if name != "onehot":  # a gather
            (r, m, d), (_, n, dd) = np.unravel_index(flat, out), shapes[0]
            e, _ = fetch(1, int(r) * shapes[1][1] + int(m))
            i = int.from_bytes(e, "little", signed=True)
            e, code = fetch(0, (int(r) * n + i) * dd + int(d)) if 0 <= i < n else fetch(2, 0)
        else:
            r, c = (int(v) for v in np.unravel_index(flat, out))
            e, _ = fetch(0, r)
            i = int.from_bytes(e, "little", signed=True)
            e, code = fetch(1, r) if i == c else fetch(2, c)
        return word(e, code), [i & 0xFFFFFFFFFFFFFFFF, word(e, code)]
    if si.split(name):  # an integer kernel: raw words, exact integers (softfloat/integers.py)
        words = [word(*fetch(o, operand_index(out, flat, sh))) for o, sh in enumerate(shapes)]
        return si.apply(name, words), words
    words = [primitive_word(*fetch(o, operand_index(out, flat, sh))) for o, sh in enumerate(shapes)]
    if name in RANDOM:  # the element's own index is its counter (prims.philox_keep, the spec)
        from repops.reference.prims import philox_keep
        return int(philox_keep(flat, *words)), words
    return execute(name, words), words


def execute(name: str, operand_words: list[int]) -> int:
    if name not in sf.PRIMITIVES:
        raise ValueError(f"{name!r} is not a primitive")
    opcode, arity, _ = sf.PRIMITIVES[name]
    return sf.apply(opcode, *operand_words[:arity])


def _how(name: str) -> str:
    if name in INDEX_OPERAND:
        return "data movement"
    return "Philox" if name in RANDOM else "exact integers" if si.split(name) else "soft-float"


def judge(name: str, result: int, operand_words: list[int], claimed: dict, parties: tuple[Party, Party],
          out_code: int):
    """-> the losers: those whose output element is not the referee's result."""
    losers = []
    for p in parties:
        if word(claimed[p.name], out_code) != result:
            p.reason = (f"{name}({', '.join(f'{w:#010x}' for w in operand_words)}) = {result:#010x} "
                        f"({_how(name)}), it claimed {word(claimed[p.name], out_code):#010x}")
            losers.append(p)
    return losers, result


def play(ctx, a: Party, b: Party, found: ElementFound) -> list[Party]:
    """Prove the element's operands (either party's proof against the agreed commitments),
    execute the one primitive, and judge. -> the losers."""
    s, j, k = found.where

    def fetch(o, idx):  # the operands are agreed: a's proof (a malformed one loses) is the truth
        proof = a.element_proof(LEVEL, found.operands[o], idx, ctx.job.spec.chunk, s, j, k, ("operand", o))
        return proof.element(), proof.code
    result, words = evaluate(found.name, found.shapes, found.flat, fetch)
    return judge(found.name, result, words, found.elements, (a, b), result_code(found.name))[0]
