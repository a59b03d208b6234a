"""The suite's CPU per test and per file from a VERDE_CPU_LOG file (tests/conftest.py):
`VERDE_CPU_LOG=/tmp/cpu.jsonl bash scripts/test.sh -q; python scripts/cpu_report.py /tmp/cpu.jsonl`.
CI's 2 cores are busy throughout the suite, so its wall time is about its CPU seconds / 2."""
import json
import sys
from collections import defaultdict


def main(path: str, top: int = 40) -> None:
    rows = [json.loads(line) for line in open(path)]
    files = defaultdict(lambda: [0.0, 0.0, 0])
    for r in rows:
        f = files[r["test"].split("::")[0]]
        f[0] += r["cpu_s"]
        f[1] += r["wall_s"]
        f[2] += 1
    cpu, wall = sum(r["cpu_s"] for r in rows), sum(r["wall_s"] for r in rows)
    print(f"{len(rows)} tests: {cpu:,.0f} CPU s, {wall:,.0f} wall s (workers' sum)\n")
    print(f"{'CPU s':>8} {'wall s':>8} {'tests':>6}  file")
    for name, (c, w, n) in sorted(files.items(), key=lambda kv: -kv[1][0])[:top]:
        print(f"{c:8.1f} {w:8.1f} {n:6d}  {name}")
    print(f"\n{'CPU s':>8} {'wall s':>8}  test")
    for r in sorted(rows, key=lambda r: -r["cpu_s"])[:top]:
        print(f"{r['cpu_s']:8.1f} {r['wall_s']:8.1f}  {r['test']}")
    timed = [r for r in rows if "end" in r]
    if timed:  # the suite's tail: a worker whose last test ended early waited for the others
        start, end = min(r["end"] - r["wall_s"] for r in timed), max(r["end"] for r in timed)
        print(f"\nsuite {end - start:,.0f} s from the first test's start to the last one's end")
        print(f"{'worker':>8} {'in tests s':>11} {'idle at the end s':>18}  last test")
        for w in sorted({r["worker"] for r in timed}):
            mine = [r for r in timed if r["worker"] == w]
            last = max(mine, key=lambda r: r["end"])
            print(f"{w:>8} {sum(r['wall_s'] for r in mine):11,.0f} {end - last['end']:18,.0f}  {last['test']}")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: python scripts/cpu_report.py CPU_LOG [TOP]  (CPU_LOG: written by VERDE_CPU_LOG=FILE bash "
                 "scripts/test.sh)")
    try:
        main(sys.argv[1], *(int(a) for a in sys.argv[2:3]))
    except BrokenPipeError:  # (| head)
        sys.stderr.close()
