"""What an idle `verde agent` asks its node, and the CPU it spends asking: a rate-limited public
RPC counts every request, and a test suite of agent processes pays every poll.

One Anvil node, a small job posted with a long join window, one honest `verde agent` (no
--poll-s: its profile's interval) talking to the node through a counting proxy; once the agent
has committed it only waits, and the requests (per JSON-RPC method) and the agent's CPU are
counted over --window seconds.

    python benchmarks/agent_rpc.py [--window 10]

Prints a table and writes benchmarks/results/agent_rpc.json."""
from __future__ import annotations

import argparse
import http.server
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VERDE = Path(sys.executable).parent / "verde"
OUT = ROOT / "benchmarks" / "results" / "agent_rpc.json"


def _proxy(upstream: str) -> tuple[http.server.ThreadingHTTPServer, Counter]:
    """A JSON-RPC forwarder on a free port that counts each request by method."""
    asked: Counter = Counter()

    class Forward(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers["Content-Length"]))
            calls = json.loads(body)
            for c in calls if isinstance(calls, list) else [calls]:
                asked[c.get("method")] += 1
            out = urllib.request.urlopen(urllib.request.Request(
                upstream, body, {"Content-Type": "application/json"}), timeout=30).read()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, *args):
            pass
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Forward)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, asked


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of a live process (/proc/PID/stat, clock ticks)."""
    fields = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(window_s: float) -> dict:
    sys.path.insert(0, str(ROOT / "tests" / "protocol"))
    from small_job import write_small_job
    from offchain.chain import connect
    from offchain.chain.verde import Verde
    from offchain.dispute.context import Context
    from offchain.protocol.jobfile import load

    with tempfile.TemporaryDirectory() as tmp, connect("anvil") as chain:
        tmp = Path(tmp)
        job_file = write_small_job(tmp / "job")
        job = load(job_file)
        v = Verde.deploy(chain)
        dep = tmp / "deployment.json"
        dep.write_text(json.dumps(v.addresses()))
        v.post(job, Context(job), 3 * 10**18, 10**18, client=chain.accounts[1])  # join window 600 s: it waits
        server, asked = _proxy(chain.w3.provider.endpoint_uri)
        log = tmp / "agent.log"
        with open(log, "w") as f:
            agent = subprocess.Popen(
                [str(VERDE), "agent", str(job_file), "1", "--chain", f"rpc:http://127.0.0.1:{server.server_port}",
                 "--deployment", str(dep), "--workdir", str(tmp / "agent")],
                env={"PATH": "/usr/bin:/bin", "VERDE_PRIVATE_KEY": chain.accounts[2].key.hex()}, stdout=f,
                stderr=subprocess.STDOUT)
        try:
            t0 = time.time()
            while "committed" not in log.read_text():
                if agent.poll() is not None or time.time() - t0 > 300:
                    raise RuntimeError(f"the agent did not commit: {log.read_text()[-2000:]}")
                time.sleep(0.2)
            time.sleep(1)  # (its commit's own reads done)
            before, cpu0, t = Counter(asked), _cpu_s(agent.pid), time.time()
            time.sleep(window_s)
            during, cpu1, span = asked - before, _cpu_s(agent.pid), time.time() - t
        finally:
            agent.kill()
            agent.wait()
            server.shutdown()
    return {"window_s": round(span, 2), "requests": sum(during.values()),
            "requests_per_s": round(sum(during.values()) / span, 2), "by_method": dict(during.most_common()),
            "agent_cpu_fraction": round((cpu1 - cpu0) / span, 4)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--window", type=float, default=10.0, help="seconds of idle waiting counted")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    row = measure(args.window)
    print(f"an idle agent (local profile) over {row['window_s']} s: {row['requests']} requests, "
          f"{row['requests_per_s']}/s, {100 * row['agent_cpu_fraction']:.1f}% of a core")
    for method, n in row["by_method"].items():
        print(f"  {method:<28} {n:>5}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"command": "python benchmarks/agent_rpc.py", **row}, indent=1))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
