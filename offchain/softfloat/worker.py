"""Evaluate soft-float primitives in bulk over a pipe, for the soak command.

Pure Python with no third-party imports so it runs under PyPy (~50x faster on this
integer code). Protocol on stdin/stdout, one request at a time:
  request : a JSON line {"op": name, "range": [start, count]}           -> inputs start..
            or          {"op": name, "arrays": count} + 3*count uint32 (a, b, c; native endian)
  response: count uint32 results (native endian)
"""
import json
import os
import sys
from array import array

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from offchain.softfloat.float32 import PRIMITIVES  # noqa: E402


def main():
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    while True:
        line = inp.readline()
        if not line:
            return
        req = json.loads(line)
        _, arity, fn = PRIMITIVES[req["op"]]
        res = array("I")
        if "range" in req:
            start, count = req["range"]
            if arity != 1:
                raise SystemExit("range requests are for unary primitives")
            res.extend(fn(x) for x in range(start, start + count))
        else:
            n = req["arrays"]
            ops = array("I")
            ops.frombytes(inp.read(12 * n))
            a, b, c = ops[:n], ops[n:2 * n], ops[2 * n:]
            if arity == 1:
                res.extend(fn(x) for x in a)
            elif arity == 2:
                res.extend(fn(x, y) for x, y in zip(a, b))
            else:
                res.extend(fn(x, y, z) for x, y, z in zip(a, b, c))
        out.write(res.tobytes())
        out.flush()


if __name__ == "__main__":
    main()
