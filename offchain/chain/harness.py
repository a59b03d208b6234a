"""Float32Harness.run(opcode, a[], b[], c[]) -> (results[], gas[]) over thousands of operands:
the calldata and the return data encoded as ABI words with numpy. web3's own path normalises
every element of every array in Python (~0.1 ms an element: 95% of a 20,000-vector check on
Anvil); the bytes sent are the same (tests/chain/test_harness_abi.py compares them with
web3's), only their making is fast."""
from __future__ import annotations

import numpy as np
from eth_utils import function_signature_to_4byte_selector

SIGNATURE = "run(uint256,uint32[],uint32[],uint32[])"
SELECTOR = function_signature_to_4byte_selector(SIGNATURE)
WORD = 32


def _word(v: int) -> bytes:
    return int(v).to_bytes(WORD, "big")


def _u32_words(x: np.ndarray) -> bytes:
    """A uint32 array as ABI words: each value big-endian in the last 4 bytes of its 32."""
    w = np.zeros((len(x), WORD // 4), ">u4")
    w[:, -1] = x
    return w.tobytes()


def encode_run(opcode: int, a, b, c) -> bytes:
    """The calldata of run(opcode, a, b, c): selector, head (opcode, three offsets), the arrays."""
    arrays = [np.asarray(x) for x in (a, b, c)]
    for name, x in zip("abc", arrays):
        if x.ndim != 1 or (x.size and (x.dtype.kind not in "iu" or x.min() < 0 or x.max() > 0xFFFFFFFF)):
            raise ValueError(f"operand {name}: a 1-d array of uint32 words is needed, got {x.dtype}{list(x.shape)}")
    head, tail, at = [_word(opcode)], [], 4 * WORD
    for x in arrays:
        head.append(_word(at))
        tail += [_word(len(x)), _u32_words(x.astype(np.uint32))]
        at += WORD * (1 + len(x))
    return SELECTOR + b"".join(head + tail)


def _u32_array(data: bytes, offset: int) -> np.ndarray:
    """The uint32[] whose length word is at `offset` of the return data."""
    n = int.from_bytes(data[offset:offset + WORD], "big")
    body = data[offset + WORD:offset + WORD * (1 + n)]
    if n > len(data) // WORD or len(body) != WORD * n:
        raise ValueError(f"return data of {len(data)} bytes has no uint32[{n}] at {offset}")
    w = np.frombuffer(body, ">u4").reshape(n, WORD // 4)
    if w[:, :-1].any():
        raise ValueError("return data holds a word above 2^32 where a uint32 is")
    return w[:, -1].astype(np.uint32)


def decode_run(data: bytes) -> tuple[np.ndarray, np.ndarray]:
    """(results, gas used per element) from run()'s return data."""
    data = bytes(data)
    if len(data) < 2 * WORD:
        raise ValueError(f"return data of {len(data)} bytes: run() returns two arrays")
    return tuple(_u32_array(data, int.from_bytes(data[i * WORD:(i + 1) * WORD], "big")) for i in range(2))


def run(chain, harness, opcode: int, a, b, c) -> tuple[np.ndarray, np.ndarray]:
    """harness.run(opcode, a, b, c) as one read (Chain.call_data: reverts decoded as for any call)."""
    return decode_run(chain.call_data(harness.address, encode_run(opcode, a, b, c), "run() call"))
