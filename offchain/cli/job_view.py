"""What `verde status JOB` shows: one job as the chain holds it, gathered once (`view`) and
rendered as text for people or as JSON for scripts (`--json`). Deadlines are chain times
(what the contracts compare with) with countdowns from the chain's clock; amounts in ETH."""
from __future__ import annotations

from ..chain.verde import (CLOCK, COMMIT_BY, JOIN_BY, MAX_TRAINERS, OP_PHASE_NAMES, PHASE_NAMES, PHASE_OPERATOR,
                           REVEAL_BY, SETTLED_AT, STAKE)

from .common import STATUS

PHASE = {1: "joining", 2: "training (commit window)", 3: "revealing", 4: "waiting for settlement"}


def _when(t: int, now: int) -> dict:
    from ..agent.watcher import utc
    return {"at": utc(t), "in_s": t - now}


def _span(s: int) -> str:
    s = abs(int(s))
    return (f"{s // 3600}h {s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m {s % 60:02d}s" if s >= 60
            else f"{s}s")


def _ago(left: int) -> str:
    return f"in {_span(left)}" if left > 0 else f"passed {_span(left)} ago"


def view(v, jid: int) -> dict:
    """Everything `verde status` says about one job, as plain data. The job's events are
    read once (the Watcher's one log scan): openings, decisions, draws, forfeits."""
    from ..agent.watcher import Watcher
    j = v.status(jid)
    terms, now, window = j[4], v.chain.now(), v.delivery().window_s
    w = Watcher(v, jid)
    w.poll()
    by_name: dict = {}
    for _, name, args in w.events:
        by_name.setdefault(name, []).append(args)
    forfeits = {a["trainer"]: a["why"] for a in by_name.get("Forfeited", ())}
    ended = {a["id"]: a for a in by_name.get("MatchDecided", []) + by_name.get("MatchDrawn", [])}
    void = {frozenset((a["a"], a["b"])) for a in by_name.get("Unsettleable", ())}
    fault = next(iter(by_name.get("FaultAccepted", ())), None)
    seats = []
    for t in j[5]:
        _, out, sealed, claim = v.chain.call(v.registry.functions.seats(jid, t))
        h = v.hold(jid, t)
        seats.append({"trainer": t, "committed": sealed != bytes(32), "revealed": claim != bytes(32),
                      "claim": "0x" + bytes(claim).hex() if claim != bytes(32) else None,
                      "out": out, "why_out": forfeits.get(t), "owed_eth": v.owed(t) / 1e18,
                      "held_eth": h.amount / 1e18, "challenges": h.asked, "chunks_pending": h.pending,
                      "challenge": {"tensor": h.open.tensor, "chunk": h.open.first + h.done,
                                    "to": h.open.first + h.open.count - 1, "due": _when(h.due, now)} if h.open
                      else None})
    status = STATUS[j[2]]
    phase = status
    if status == "open":
        # (the windows close early once every seat has acted: JobRegistry.everyoneCommitted / everyoneRevealed)
        phase = PHASE[4 if v.settle_open(jid, terms, now) else 3 if v.reveal_open(jid, terms, now)
                      else 1 if now < terms[JOIN_BY] and len(j[5]) < terms[MAX_TRAINERS] else 2]
    matches = []
    for opened in by_name.get("MatchOpened", ()):
        m, parties = opened["id"], [opened["a"], opened["b"]]
        entry, end = {"id": m, "parties": parties}, ended.get(m)
        if end is not None and "winner" in end:
            entry.update(result="decided", level=end["level"], winner=end["winner"], loser=end["loser"],
                         reason=end["reason"])
        elif end is not None and frozenset(parties) in void:
            entry.update(result="void: it reached a node the chain cannot settle (both out, stakes returned)",
                         level=end["level"])
        elif end is not None:
            entry.update(result="drawn (both out of time)", level=end["level"])
        else:
            st = v.match_state(m)
            where = PHASE_NAMES[st["phase"]]
            if st["phase"] == PHASE_OPERATOR:
                where += ", " + OP_PHASE_NAMES[v.operator_state(m)["phase"]]
            left, waiting = v.clocks(m)
            entry.update(result="in play", where=where, clock_left_s=left,
                         waiting_for=[parties[i] for i in (0, 1) if waiting >> i & 1])
        matches.append(entry)
    requested = [a for a in v.requested_match(jid)[0] if int(a, 16)]
    d = {"job": jid, "status": status, "phase": phase, "client": j[0], "payment_eth": j[1] / 1e18,
            "stake_eth": terms[STAKE] / 1e18, "pot_eth": j[6] / 1e18, "only_named_trainers": j[7],
            "seats": f"{len(j[5])} of {terms[MAX_TRAINERS]}", "chain_time": _when(now, now)["at"],
            "deadlines": {k: _when(terms[i], now) for k, i in (("join", JOIN_BY), ("commit", COMMIT_BY),
                                                               ("reveal", REVEAL_BY))},
            "clock_s": terms[CLOCK], "trainers": seats,
            "delivery_hold_until": _when(j[SETTLED_AT] + window, now) if status == "settled" and window else None,
            "requested_match": requested, "matches": matches,
            "accepted": "0x" + bytes(j[3]).hex() if status == "settled" and j[3] != bytes(32) else None,
            "fault": {"step": fault["step"], "paid_eth": fault["paid"] / 1e18, "refunded_eth": fault["refunded"] / 1e18}
            if fault else None,
            "client_owed_eth": v.owed(j[0]) / 1e18}
    from .profiles import applies
    d["next"], d["profile"] = next_move(d), applies(v.chain)
    return d


def next_move(d: dict) -> dict:
    """What the job waits for, from its view: {action, command, who, why}. action is the
    transaction `verde settle` sends ("settle", "open", "timeout"), or None when it waits for
    the agents, a deadline or another command (`command`, or None when nothing is needed)."""
    jid = d["job"]
    settle = f"verde settle {jid}"
    if d["status"] == "open":
        if d["phase"] == PHASE[4]:
            why = ("nobody joined: settling refunds the client's payment (then verde withdraw)" if not d["trainers"]
                   else "every seat revealed, or the reveal deadline passed: settling accepts the revealed result, "
                   "forfeits every seat that did not reveal, or asks for a dispute")
            return dict(action="settle", command=settle, who="anyone", why=why)
        if d["phase"] == PHASE[1]:
            return dict(action=None, command=None, who="trainers",
                        why=f"trainers join until {d['deadlines']['join']['at']} (verde agent JOB {jid}); "
                        f"if nobody does, `{settle}` refunds the payment after the join deadline")
        what = "commit" if d["phase"] == PHASE[2] else "reveal"
        key = "commit" if what == "commit" else "reveal"
        return dict(action=None, command=None, who="trainers",
                    why=f"the trainers' agents {what} by {d['deadlines'][key]['at']} (the window closes sooner once "
                    f"every seat has: then `{settle}`, anyone, if no agent settles)")
    if d["status"] == "disputed":
        live = [m for m in d["matches"] if "where" in m]
        if not live:
            pair = " vs ".join(d["requested_match"])
            return dict(action="open", command=settle, who="anyone",
                        why=f"the registry asks for a match {pair}: its agents open it, or `{settle}` does "
                        f"(its parties' clocks of {d['clock_s']} s start then)")
        m = live[0]
        out = [p for p, left in zip(m["parties"], m["clock_left_s"]) if p in m["waiting_for"] and left <= 0]
        if out:
            return dict(action="timeout", command=settle, who="anyone",
                        why=f"match {m['id']}: {', '.join(out)} let its clock run out; the timeout decides the "
                        "match and the job settles on")
        return dict(action=None, command=None, who="the match's parties",
                    why=f"match {m['id']} is in play; waiting for {', '.join(m['waiting_for']) or 'nobody'} to move")
    held = [t for t in d["trainers"] if t["held_eth"]]
    if held:
        hold = d["delivery_hold_until"]
        over = hold is not None and hold["in_s"] <= 0
        return dict(action=None, command=f"verde release {jid}", who="anyone" if over else "the client",
                    why="the delivery window is over: releasing pays the accepted trainers" if over else
                    f"the accepted trainers' pay is held until {hold['at'] if hold else '-'}: the client releases it "
                    "once it has the model (verde fetch), or challenges a trainer that does not deliver")
    if d["client_owed_eth"]:
        return dict(action=None, command="verde withdraw", who="the client",
                    why=f"the registry owes the client {d['client_owed_eth']} ETH")
    owed = [t["trainer"] for t in d["trainers"] if t["owed_eth"]]
    if owed:
        return dict(action=None, command="verde withdraw", who=", ".join(owed),
                    why="the registry owes these trainers their pay (each withdraws with its own key; its agent does)")
    return dict(action=None, command=None, who=None, why="settled; nothing is owed")


def render(d: dict) -> list[str]:
    """The view as lines for a person."""
    out = [f"job {d['job']}: {d['status']}, payment {d['payment_eth']} ETH, stake {d['stake_eth']} ETH, "
           f"pot {d['pot_eth']} ETH, client {d['client']}" + (", named trainers only" if d["only_named_trainers"]
                                                               else "")]
    if d["phase"] != d["status"]:
        out.append(f"  now: {d['phase']}")
    for name, w in d["deadlines"].items():
        out.append(f"  {name + ' by':<10} {w['at']}  ({_ago(w['in_s'])})")
    out.append(f"  chain time {d['chain_time']}; dispute clock {d['clock_s']} s per party")
    if d.get("profile"):
        out.append(f"  defaults: {d['profile']}")
    out.append(f"  trainers ({d['seats']} seats): {'-' if not d['trainers'] else ''}")
    for t in d["trainers"]:
        state = ("revealed " + t["claim"][:18] + "…" if t["revealed"] else "committed" if t["committed"]
                 else "joined")
        fate = f"out: {t['why_out']}" if t["out"] else "live"
        owed = f", owed {t['owed_eth']} ETH" if t["owed_eth"] else ""
        if t["held_eth"]:
            c = t["challenge"]
            owed += f", {t['held_eth']} ETH held for delivery" + (
                f"; challenged for chunks {c['chunk']}-{c['to']} of state tensor {c['tensor']} (of "
                f"{t['chunks_pending']} unanswered), due {c['due']['at']} ({_ago(c['due']['in_s'])})" if c else "")
        out.append(f"    {t['trainer']}  {state}; {fate}{owed}")
    if d["requested_match"]:
        out.append(f"  the registry asks for a match: {' vs '.join(d['requested_match'])}")
    for m in d["matches"]:
        head = f"  match {m['id']}: "
        if m["result"] == "decided":
            out.append(head + f"decided at level {m['level']}, {m['winner']} won, {m['loser']} lost: {m['reason']}")
        elif "where" in m:
            wait = ", ".join(m["waiting_for"]) or "nobody"
            out.append(head + f"{m['parties'][0]} vs {m['parties'][1]}, {m['where']}; clocks left {m['clock_left_s'][0]} s / {m['clock_left_s'][1]} s; "
                              f"waiting for {wait}")
        else:
            out.append(head + m["result"])
    if d["accepted"] and d.get("fault"):
        f = d["fault"]
        out.append(f"  accepted result: a FAULT at step {f['step']} (the job's data or program cannot be computed "
                   f"there; {d['accepted']}): the trainers were paid {f['paid_eth']} ETH for the {f['step']} steps "
                   f"before it, {f['refunded_eth']} ETH went back to the client; there is no model to fetch")
    elif d["accepted"]:
        out.append(f"  accepted result C_T = {d['accepted']}")
    if d["delivery_hold_until"] and any(t["held_eth"] for t in d["trainers"]):
        w = d["delivery_hold_until"]
        out.append(f"  delivery window until {w['at']} ({_ago(w['in_s'])}): the client may challenge an accepted "
                   "trainer for a chunk (verde challenge) or release its pay (verde release)")
    if d["client_owed_eth"]:
        out.append(f"  client owed {d['client_owed_eth']} ETH (verde withdraw)")
    n = d.get("next")
    if n and n["command"]:
        out.append(f"  next: `{n['command']}` ({n['who']}): {n['why']}")
    elif n:
        out.append(f"  next: {n['why']}")
    return out
