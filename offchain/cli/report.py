"""`verde report ID [JOB] --out report.png`: a picture of any job from the chain's events
alone (and the agents' loss logs when their workdirs are given): its phases on a time axis,
the bisection's path, the gas of each dispute level, and in words the matches and who was
paid or lost what. The demo (main_job.py) draws its report with the same `draw`."""
from __future__ import annotations

import json
from pathlib import Path

from ..agent.watcher import Watcher, gas_by_level, utc
from .common import chain_args, console, existing_job, verde_of

# the events drawn on the time axis, and their row (a phase of the job)
ROWS = {"JobPosted": "posted", "Joined": "join", "Committed": "commit", "Revealed": "reveal",
        "DisputeRequired": "dispute", "MatchOpened": "dispute", "MatchDecided": "dispute", "MatchDrawn": "dispute",
        "Settled": "settle", "FaultAccepted": "settle", "Forfeited": "settle", "Held": "delivery",
        "DeliveryChallenged": "delivery", "DeliveryAnswered": "delivery", "Released": "delivery"}
ORDER = ["posted", "join", "commit", "reveal", "dispute", "settle", "delivery"]


def timeline(v, jid: int, watcher: Watcher, names: dict | None = None) -> dict:
    """The job's deadlines and its events on chain time, in seconds after the posting:
    {"deadlines": {join, commit, reveal}, "events": [(s, row, label)]}."""
    from ..chain.verde import COMMIT_BY, JOIN_BY, REVEAL_BY
    w3, names = v.chain.w3, names or {}
    stamps: dict[int, int] = {}

    def at(block: int) -> int:
        if block not in stamps:
            stamps[block] = int(w3.eth.get_block(block)["timestamp"])
        return stamps[block]
    posted = next((b for b, n, _ in watcher.events if n == "JobPosted"), None)
    t0 = at(posted) if posted is not None else at(watcher.events[0][0]) if watcher.events else 0
    terms = v.status(jid)[4]
    events = []
    for block, name, a in watcher.events:
        who = a.get("trainer") or a.get("winner")
        label = name + (f" {names.get(who, who[:8] + '…')}" if isinstance(who, str) else "")
        if name in ROWS:
            events.append((at(block) - t0, ROWS[name], label))
    return {"t0": t0, "deadlines": {"join": terms[JOIN_BY] - t0, "commit": terms[COMMIT_BY] - t0,
                                    "reveal": terms[REVEAL_BY] - t0}, "events": events}


def draw(path: Path, curves: list, path_events: list, per_level: dict, headline: str = "",
         times: dict | None = None) -> None:
    """The report PNG. curves: [(label, {step: loss}, honest)] (none: the panel says how to get
    them); path_events: Watcher.bisection_path(); per_level: gas by dispute level; times:
    `timeline` (its panel first)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    widths = ([1.3] if times else []) + [1.2, 1.2, 0.8]
    fig, axes = plt.subplots(1, len(widths), figsize=(5 * len(widths), 5), gridspec_kw={"width_ratios": widths})
    if times:
        tx, axes = axes[0], axes[1:]
        rows = [r for r in ORDER if any(e[1] == r for e in times["events"])]
        y = {r: i for i, r in enumerate(rows)}
        d = times["deadlines"]
        for (name, end), start in zip(d.items(), (0, d["join"], d["commit"])):
            tx.axvspan(start, end, alpha=0.08, color={"join": "C0", "commit": "C1", "reveal": "C2"}[name])
            tx.axvline(end, color="grey", linewidth=0.6, linestyle=":")
            tx.text(end, 0.99, f"{name} by ", transform=tx.get_xaxis_transform(), fontsize=7, rotation=90,
                    ha="right", va="top", color="grey")
        for s, row, label in times["events"]:
            tx.scatter([s], [y[row]], color=f"C{y[row]}", zorder=3)
        seen, per_row = set(), {}
        for s, row, label in times["events"]:  # one label per row and kind (a job has many moves), stacked
            if (row, label.split()[0]) not in seen:
                seen.add((row, label.split()[0]))
                k = per_row[row] = per_row.get(row, -1) + 1
                tx.annotate(label, (s, y[row]), textcoords="offset points", xytext=(4, 5 - 9 * k), fontsize=7)
        tx.set_yticks(range(len(rows)), rows)
        tx.set_ylim(len(rows) - 0.5, -0.5)
        tx.set_xlabel("chain time after posting (s)")
        tx.set_title(f"phases (posted {utc(times['t0'])})")
    ax, bx, cx = axes
    # the dishonest first, underneath; the honest curves on top in distinct dashes and markers,
    # so that curves which coincide (two honest trainers) stay visible
    styles = iter([("-", "o", 7, 2.6), ("--", "x", 7, 1.6), (":", "+", 9, 1.6), ("-.", "s", 4, 1.2)] * 8)
    for z, (label, losses, _) in enumerate(sorted(curves, key=lambda c: c[2])):
        steps = sorted(losses)
        line, marker, size, width = next(styles)
        ax.plot(steps, [losses[s] for s in steps], linestyle=line, marker=marker, markersize=size, linewidth=width,
                zorder=2 + z, label=label)
    if curves:
        ax.legend()
    else:
        ax.text(0.5, 0.5, "no loss logs\n(verde report --workdir DIR, per agent)", ha="center", va="center",
                transform=ax.transAxes)
    ax.set_xlabel("step")
    ax.set_ylabel("training loss")
    ax.set_title("each trainer's loss (its own process)")

    if path_events:
        blocks, levels, _ = zip(*path_events)
        bx.step(blocks, levels, where="post", color="C0")
        bx.scatter(blocks, levels, color="C0", zorder=3)
        # one label where the path enters a level and one where it leaves it, stacked per level
        # (every event labelled made an unreadable pile where one level takes many moves)
        first, last = {}, {}
        for i, (_, y, _) in enumerate(path_events):
            first.setdefault(y, i)
            last[y] = i
        for y in sorted(first):
            for k, i in enumerate(sorted({first[y], last[y]})):
                x, _, label = path_events[i]
                bx.annotate(label, (x, y), textcoords="offset points", xytext=(5, 7 if k == 0 else -14), fontsize=8)
        bx.set_ylim(5.6, 0.5)
        bx.set_yticks(range(1, 6), ["1 steps", "2 nodes", "3 kernels", "4 elements", "5 one op"])
    else:
        bx.text(0.5, 0.5, "no dispute", ha="center", va="center", transform=bx.transAxes)
        bx.set_xticks([])
        bx.set_yticks([])
    bx.set_xlabel("block")
    bx.set_title(f"the bisection's path ({len(path_events)} events)")

    levels = sorted(per_level)
    if not levels:
        cx.text(0.5, 0.5, "no dispute: no game gas", ha="center", va="center", transform=cx.transAxes)
        cx.set_xticks([])
        cx.set_yticks([])
    cx.bar([f"L{lv}" for lv in levels], [per_level[lv] / 1e6 for lv in levels], color=[f"C{lv}" for lv in levels])
    cx.set_ylabel("gas (millions)")
    cx.set_title("gas per level")
    if headline:
        fig.suptitle(headline, fontsize=12, fontweight="bold")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def payouts(watcher: Watcher, names: dict) -> list[str]:
    """Who was paid, held, refunded or lost what in this job, from its events, in words."""
    out = []
    for _, n, a in watcher.events:
        who = names.get(a.get("trainer"), a.get("trainer"))
        if n == "Held":
            out.append(f"{who}: {a['amount'] / 1e18} ETH (stake and share) held for delivery until {utc(a['until'])}")
        elif n == "Released":
            out.append(f"{who}: {a['amount'] / 1e18} ETH released")
        elif n == "Forfeited":
            out.append(f"{who}: lost its stake of {a['stake'] / 1e18} ETH ({a['why']})")
        elif n == "FaultAccepted":
            out.append(f"a fault at step {a['step']}: {a['paid'] / 1e18} ETH to the trainers, {a['refunded'] / 1e18} "
                       "ETH back to the client")
        elif n == "Settled" and not a["paidTrainers"]:
            out.append("no result accepted: the payment (and any forfeited stakes) back to the client")
        elif n == "Settled":
            out.append(f"settled: result 0x{bytes(a['accepted']).hex()[:16]}… accepted, {a['paidTrainers']} trainer(s) "
                       "paid (stake back and a share of the payment and the pot)")
    return out


def cmd_report(args) -> int:
    from ..chain import ChainError
    chain, v = verde_of(args)
    with chain:
        j = existing_job(v, args.job_id)
        if args.job is not None:
            from .common import load_job
            job = load_job(args.job, "pass the job file that was posted")
            if bytes(j[4][0]) != job.job_id:
                raise ChainError(f"job {args.job_id} is not the job of {args.job}", "pass its job file")
        w = Watcher(v, args.job_id)
        w.poll()
        names = {}
        curves = []
        for d in args.workdir or ():
            f = Path(d) / "trainer" / "losses.json"
            if not f.exists():
                raise ChainError(f"{f} does not exist: not an agent's workdir (or it has not trained yet)",
                                 "pass the --workdir each agent ran with")
            curves.append((Path(d).name, {int(k): x for k, x in json.loads(f.read_text()).items()}, True))
        moves = w.moves()
        per_level = gas_by_level(moves)
        decided = [a for _, n, a in w.events if n == "MatchDecided"]
        settled = [a for _, n, a in w.events if n == "Settled"]
        headline = "; ".join([f"job {args.job_id}: " + (f"accepted 0x{bytes(settled[0]['accepted']).hex()[:12]}…"
                                                        if settled and settled[0]["paidTrainers"] else
                                                        "no result accepted" if settled else "not settled")]
                             + [f"{d['winner'][:8]}… beat {d['loser'][:8]}… at level {d['level']}" for d in decided])
        draw(Path(args.out), curves, w.bisection_path(), per_level, headline, timeline(v, args.job_id, w, names))
    console.print(headline, highlight=False)
    for d in decided:
        console.print(f"  match {d['id']}: {d['winner']} beat {d['loser']} at level {d['level']}: {d['reason']}",
                      highlight=False)
    if moves:
        console.print("  dispute gas by level: " + ", ".join(f"L{lv} {g:,}" for lv, g in sorted(per_level.items())) +
                      f" ({len(moves)} transactions)")
    for line in payouts(w, names):
        console.print("  " + line, highlight=False)
    console.print(f"wrote {args.out}")
    return 0


def add(sub):
    q = sub.add_parser("report", help="draw any job's report from the chain's events: phases, the bisection's path, "
                                      "gas per level, payouts (losses from the agents' workdirs)")
    chain_args(q)
    q.add_argument("job_id", type=int)
    q.add_argument("job", nargs="?", help="its job file (optional: checked to be the job posted)")
    q.add_argument("--out", default="report.png", help="the PNG (default report.png)")
    q.add_argument("--workdir", action="append", metavar="DIR",
                   help="an agent's workdir: its loss curve is drawn (repeat per agent)")
    q.set_defaults(fn=cmd_report)
