"""The embedded chain (py-evm) served over HTTP JSON-RPC, so that separate processes (the
trainer agents, the client, a watcher) share one chain without Anvil. Requests are
served one at a time: py-evm is not thread-safe, and every request is short.

Answers are standard JSON-RPC (hex quantities, hex data); a revert is error code 3 with
the revert bytes as `data`, as Anvil sends it, so `Chain` decodes custom errors the same
way on both nodes. `evm_setNextBlockTimestamp` and `evm_mine` move the clock, as on Anvil.

    python -m offchain.chain.embedded_node --port 8545
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

from eth_utils import to_int
from hexbytes import HexBytes

from .anvil import AnvilProcess

CLIENT_VERSION = "verde-embedded"  # what rpc() recognizes as a local chain


def to_rpc(x):
    """web3's in-process answers (ints, bytes, AttributeDicts) -> JSON-RPC wire values."""
    if isinstance(x, bool) or x is None or isinstance(x, str):
        return x
    if isinstance(x, int):
        return hex(x)
    if isinstance(x, (bytes, bytearray, HexBytes)):
        return "0x" + bytes(x).hex()
    if isinstance(x, dict) or hasattr(x, "items"):
        out = {_camel(k): to_rpc(v) for k, v in x.items()}
        if "nonce" in out and "data" in out and "hash" in out:  # a transaction: its calldata is `input`
            out["input"] = out.pop("data")
        return out
    if isinstance(x, (list, tuple)):
        return [to_rpc(v) for v in x]
    raise TypeError(f"cannot send a {type(x).__name__} over JSON-RPC")


def _camel(key: str) -> str:
    """eth-tester leaves the transactions inside a block in snake_case."""
    head, *rest = key.split("_")
    return head + "".join(w.title() for w in rest)


class EmbeddedNode:
    """One py-evm chain (the same funded accounts as `embedded()`), answering JSON-RPC."""

    MINING = ("eth_sendRawTransaction", "eth_sendTransaction", "evm_mine")  # each makes a block

    def __init__(self, w3):
        self.w3 = w3
        self.tester = w3.provider.ethereum_tester
        self._request = w3.provider.request_func(w3, w3.middleware_onion)
        self.mined_at = time.time()  # wall time of the latest block (interval mining counts from it)

    def answer(self, req: dict) -> dict:
        rid = req.get("id")
        method, params = req.get("method"), req.get("params") or []
        if not isinstance(method, str):
            return {"jsonrpc": "2.0", "id": rid, "error": {"code": -32600, "message": "no method"}}
        if method in self.MINING:
            self.mined_at = time.time()
        try:
            return {"jsonrpc": "2.0", "id": rid, "result": self._call(method, params)}
        except Exception as e:  # every failure goes back to the caller; the node keeps serving
            return {"jsonrpc": "2.0", "id": rid, "error": self._error(e)}

    def _call(self, method: str, params: list):
        if method == "web3_clientVersion":
            return CLIENT_VERSION
        if method == "evm_setNextBlockTimestamp":
            self.tester.time_travel(to_int(hexstr=params[0]) if isinstance(params[0], str) else int(params[0]))
            return True
        if method == "evm_mine":
            self.tester.mine_blocks(1)
            return "0x0"
        out = self._request(method, params)
        if "error" in out:
            raise RuntimeError(str(out["error"]))
        return to_rpc(out["result"])

    @staticmethod
    def _error(e: Exception) -> dict:
        from .client import _revert_data
        if type(e).__name__ in ("TransactionFailed", "ContractLogicError", "ContractCustomError"):
            return {"code": 3, "message": "execution reverted", "data": "0x" + _revert_data(e).hex()}
        return {"code": -32000, "message": f"{type(e).__name__}: {e}"}


def _handler(node: EmbeddedNode):
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            try:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            except ValueError:
                out = {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "parse error"}}
            else:
                out = [node.answer(r) for r in body] if isinstance(body, list) else node.answer(body)
            data = json.dumps(out).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):  # one line per request would drown the agents' logs
            pass
    return Handler


class EmbeddedNodeProcess(AnvilProcess):
    """The embedded chain served by a child process we own, like Anvil (same accounts)."""
    name = "the embedded node"
    chain_id = None

    def __init__(self, port: int | None = None, block_time: float = 0):
        super().__init__(port, binary=Path(sys.executable))
        self.block_time = block_time

    def argv(self) -> list[str]:
        return [sys.executable, "-m", "offchain.chain.embedded_node", "--port", str(self.port),
                "--block-time", str(self.block_time)]


def serve(port: int, host: str = "127.0.0.1", ready=None, block_time: float = 0):
    """block_time > 0: also mine an empty block whenever that long passed without one, so
    the chain's clock keeps pace with the wall clock on an idle chain (agents read time
    from the latest block: on a chain that only mines on a transaction, deadlines pass
    unseen). The clock keeps any offset a test moved it by, as Anvil does."""
    from .embedded import embedded_w3
    node = EmbeddedNode(embedded_w3())
    server = HTTPServer((host, port), _handler(node))
    if ready is not None:
        ready(server)
    if not block_time:
        return server.serve_forever()
    while True:
        idle = time.time() - node.mined_at
        if idle >= block_time:
            node.tester.time_travel(node.w3.eth.get_block("latest")["timestamp"] + max(1, round(idle)))
            node.tester.mine_blocks(1)
            node.mined_at, idle = time.time(), 0.0
        server.timeout = max(0.01, block_time - idle)
        server.handle_request()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m offchain.chain.embedded_node", description=__doc__.split("\n\n")[0])
    p.add_argument("--port", type=int, default=8545)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--block-time", type=float, default=0, help="mine an empty block after this many idle seconds")
    a = p.parse_args(argv)
    try:
        serve(a.port, a.host, ready=lambda s: print(f"embedded chain listening on http://{a.host}:{s.server_port}",
                                                   flush=True), block_time=a.block_time)
    except OSError as e:
        print(f"error: cannot listen on {a.host}:{a.port}: {e.strerror}\n  Fix: pick another --port", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
