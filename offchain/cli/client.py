"""`verde` commands of a client (and anyone watching): post a job, its status and events,
fetch its model, challenge an accepted trainer that does not deliver and release the pay of
one that did, withdraw what the registry owes a key (trainers withdraw their pay the same
way)."""
from __future__ import annotations

import shutil
import time
from pathlib import Path

from rich.markup import escape

from ..chain import ChainError
from .common import STATUS, address, bounded, chain_args, console, eth, existing_job, load_job, step, verde_of


def cmd_post(args) -> int:
    from ..dispute.context import Context
    job = load_job(args.job)
    _check_first_step(job)
    chain, v = verde_of(args)
    with chain:
        behind = time.time() - chain.now()
        if behind > 60:
            console.print(f"[yellow]warning:[/] the chain's clock is {behind:.0f} s behind this machine's (its last "
                          "block is that old: an idle node that mines only on transactions); the deadlines count "
                          "from the chain's clock and pass unseen while it stands still\n"
                          "  Fix: run the node with a block time (`verde node --block-time 2`, the default)")
        v.check_new(job)  # a spec already computed here is refused (a replayed result could be paid)
        _check_not_open(v, job)
        join_s, train_s, reveal_s, clock_s, said = _windows(args, chain, v)
        step(f"committing to job {job.job_id.hex()[:16]}… (graph, data, kernel structures: one traced step)")
        jid = v.post(job, Context(job), args.payment, args.stake, max_trainers=args.max_trainers,
                     join_s=join_s, commit_s=join_s + train_s, reveal_s=join_s + train_s + reveal_s, clock_s=clock_s,
                     client=chain.accounts[0], only=args.only)
        who = f"; only {', '.join(args.only)} may join" if args.only else ""
        console.print(f"posted job {jid} (payment {args.payment / 1e18} ETH, stake {args.stake / 1e18} ETH{who})")
        console.print(f"  {said}: join {join_s} s, train {train_s} s, reveal {reveal_s} s (settlement from "
                      f"{_utc(chain.now() + join_s + train_s + reveal_s)}), dispute clock {clock_s} s per party",
                      highlight=False)
    return 0


def _check_first_step(job) -> None:
    """One real step on the first batch under RepOps, before any money moves: what every trainer
    runs first. A job file written by hand, by another tool or by `write_job` (which does not
    run the model) may be refused there or fault; posted, it would pay for nothing."""
    from ..protocol.dataset import check_first_step
    from ..protocol.job import JobError
    step("running the first step on the first batch (what a trainer runs first)…")
    try:
        check_first_step(job)
    except JobError as e:
        problem, _, fix = str(e).partition("\n  Fix: ")
        raise ChainError(f"the job cannot be posted: {problem}", fix or "correct the job's data or model") from None


def _windows(args, chain, v) -> tuple:
    """--join-s, --train-s, --reveal-s, --clock-s as given, else the profile's (profiles.py),
    never below the registry's floors. -> (join, train, reveal, clock, which profile)."""
    from .profiles import applies, profile_of
    prof, floors = profile_of(chain), v.floors()
    pick = [(args.join_s, prof.join_s, 1), (args.train_s, prof.train_s, floors.commit_window_s),
            (args.reveal_s, prof.reveal_s, floors.reveal_window_s), (args.clock_s, prof.clock_s, floors.clock_s)]
    return (*(given if given is not None else max(default, floor) for given, default, floor in pick), applies(chain))


def _utc(t: int) -> str:
    from ..agent.watcher import utc
    return utc(t)


def _check_not_open(v, job):
    """A second posting of a job that is still open would take its result from the first as
    soon as that one is revealed (a replay the registry cannot see yet): refuse it here."""
    for e in v.registry.events.JobPosted().get_logs(from_block=v.from_block):
        if bytes(e["args"]["specHash"]) == job.job_id and STATUS[v.status(e["args"]["id"])[2]] != "settled":
            jid = e["args"]["id"]
            raise ChainError(f"job {job.job_id.hex()[:16]}… is already posted and not settled (job {jid}): once a "
                             f"result is revealed there, a trainer of this posting could replay it without training "
                             "(docs/PROTOCOL.md §6)", f"wait for job {jid} and fetch its result, or change data.seed "
                             "in the job file so that the batches, and the result, differ")


def cmd_status(args) -> int:
    import json

    from .job_view import render, view
    chain, v = verde_of(args)
    with chain:
        existing_job(v, args.job_id)
        d = view(v, args.job_id)
    if args.json:
        print(json.dumps(d, indent=1))
    else:
        for line in render(d):
            console.print(line, highlight=False)
    return 0


def cmd_fetch(args) -> int:
    """The accepted result of a job, from a result store, checked against the chain."""
    from safetensors.torch import save_file

    from ..protocol.delivery import DeliveryError, model_tensors, verify
    job = load_job(args.job, "pass the job file that was posted")
    chain, v = verde_of(args)
    with chain:
        j = existing_job(v, args.job_id)
        if STATUS[j[2]] != "settled" or j[3] == bytes(32):
            raise ChainError(f"job {args.job_id} has no accepted result ({STATUS[j[2]]})",
                             "wait until it is settled with a result (verde status)")
        if bytes(j[4][0]) != job.job_id:
            raise ChainError(f"job {args.job_id} is not the job of {args.job}", "pass its job file")
        f = v.accepted_fault(args.job_id)
        if f:  # docs/PROTOCOL.md §6: the run could not be computed past that step
            raise ChainError(f"job {args.job_id}'s accepted result is a fault: its step {f['step']} cannot be computed "
                             f"(an index out of range or a division by zero in its data or program), so there is no "
                             f"model; the trainers were paid {f['paid'] / 1e18} ETH for the steps before it and "
                             f"{f['refunded'] / 1e18} ETH went back to the client",
                             "withdraw the refund (verde withdraw), fix the data or program the step reads (train "
                             "the job yourself with `verde train` to see where: it stops with the fault's node and "
                             "element), and post the corrected job")
        claim = bytes(j[3])
        holds = _held(v, args.job_id, None)
    from ..protocol import http_store
    store, parts = args.store, None
    try:
        if http_store.is_url(args.store):  # downloaded beside --out (resumable), then checked as a local store
            parts = Path(args.out).resolve().parent / f".{Path(args.out).name}.download"
            console.print(f"downloading the result {claim.hex()[:16]}… from {args.store} (resumable: {parts})")
            store = http_store.download(args.store, claim, parts)
        state = verify(job, store, claim)
        model = model_tensors(job, state)  # exactly the committed tensors; the model's names, one to one
    except http_store.TransferError as e:
        raise ChainError(str(e), f"run the same command again: it resumes from {parts}") from None
    except DeliveryError as e:
        if parts is not None:
            http_store.discard(parts, claim)  # what did not verify is not kept for a re-run
        raise ChainError(str(e), "ask the accepted trainer to publish (its agent writes to WORKDIR/published and "
                                 "serves it with --serve HOST:PORT), or point --from at its store; a trainer that does "
                                 "not deliver can be challenged on chain while its pay is held (verde challenge "
                                 f"{args.job_id} JOB --trainer ADDR)") from None
    out = state if args.with_optimizer else model
    save_file(out, args.out)
    if parts is not None:
        shutil.rmtree(parts, ignore_errors=True)
    console.print(f"job {args.job_id}: the accepted result {claim.hex()[:16]}… checked ({len(state)} tensors, every "
                  f"chunk against its commitment); wrote {len(out)} tensors to {args.out}")
    if job.spec.inference:
        from ..protocol.program import OUTPUTS
        o = model[OUTPUTS]
        name = next(n for n, t in out.items() if t is o)  # `buffer.outputs` with --with-optimizer
        console.print(f"  an inference job: its outputs are tensor {name!r} {str(o.dtype).removeprefix('torch.')} "
                      f"{list(o.shape)}, row i the output of data row i")
    if any(h.amount for h in holds.values()):
        console.print(f"  the accepted trainers' pay is held for delivery: `verde release {args.job_id}` pays them now")
    return 0


def _held(v, jid: int, only: list | None) -> dict:
    """{trainer: Hold} of the job's accepted trainers whose pay is held (or of `only`)."""
    return {t: h for t in (only or v.status(jid)[5]) if (h := v.hold(jid, t)).amount}


def cmd_challenge(args) -> int:
    """Ask an accepted trainer for chunks of the result on chain, paying the deployment's bond
    per chunk: --from STORE asks for every chunk that store lacks (what the client could not
    verify), --tensor for a range (--chunk, --count), neither for one random chunk (a spot check)."""
    import secrets

    from ..protocol.dataset import initial_state
    from ..protocol.delivery import missing_chunks
    from ..protocol.tensors import chunk_count
    job = load_job(args.job, "pass the job file that was posted")
    chain, v = verde_of(args)
    with chain:
        j = existing_job(v, args.job_id)
        if bytes(j[4][0]) != job.job_id:
            raise ChainError(f"job {args.job_id} is not the job of {args.job}", "pass its job file")
        if args.trainer not in _held(v, args.job_id, [args.trainer]):
            raise ChainError(f"{args.trainer} has no pay held in job {args.job_id} (not accepted, already paid, or "
                             "the job is not settled)", "see `verde status " + str(args.job_id) + "`")
        state = initial_state(job)
        names, shapes = state.names(), [tuple(t.shape) for t in state.tensors()]
        if args.store is not None:
            asked = missing_chunks(job, args.store, bytes(j[3]))
            if not asked:
                console.print(f"{args.store} holds the whole accepted result (every chunk verified): nothing to ask; "
                              f"`verde fetch {args.job_id}` it, and `verde release {args.job_id}` pays the trainers")
                return 0
        else:
            if args.tensor is None:
                tensor = secrets.randbelow(len(names))
            elif args.tensor in names:
                tensor = names.index(args.tensor)
            elif args.tensor.isdigit() and int(args.tensor) < len(names):
                tensor = int(args.tensor)
            else:
                raise ChainError(f"no state tensor {args.tensor!r} in this job",
                                 f"name one of {', '.join(names[:8])}… or give an index below {len(names)}")
            n = chunk_count(shapes[tensor], job.spec.chunk)
            first = secrets.randbelow(n) if args.chunk is None else args.chunk
            asked = {tensor: list(range(first, first + args.count))}
        chunks = sum(len(c) for c in asked.values())
        bond = v.delivery().bond_wei * chunks
        if bond > args.max_bond:
            raise ChainError(f"asking for {chunks} chunks takes {bond / 1e18} ETH of bonds, above --max-bond "
                             f"{args.max_bond / 1e18} ETH (each answered chunk's bond pays the trainer's gas)",
                             "pass a larger --max-bond if you want them all on chain, or fewer chunks (--tensor)")
        sent = v.challenge_chunks(args.job_id, args.trainer, asked, chain.accounts[0])
        last = v.hold(args.job_id, args.trainer).asked - 1  # the challenges' deadlines only grow
        due = v.chain.call(v.registry.functions.asks(args.job_id, args.trainer, last))[3]
        what = ", ".join(f"{names[t]} ({len(c)} of {chunk_count(shapes[t], job.spec.chunk)} chunks)"
                         for t, c in sorted(asked.items())[:6]) + (" …" if len(asked) > 6 else "")
        console.print(f"asked {args.trainer} for {chunks} chunks in {sent} challenges ({what}), {bond / 1e18} ETH of "
                      f"bonds; the last due by {_utc(due)} (in {due - chain.now()} s)", highlight=False)
        console.print(f"  answered: the chunks appear in `verde watch {args.job_id}`, each bond goes to the trainer; any "
                      f"chunk not answered in time: `verde release {args.job_id}` gives you its held pay and stake and "
                      "the unanswered bonds")
    return 0


def cmd_release(args) -> int:
    """End the delivery holds of a job: each trainer is paid (by the client at any time, by
    anyone once the window is over) or, after an unanswered challenge, the client is."""
    from web3.logs import DISCARD

    from ..chain.errors import TransactionReverted
    chain, v = verde_of(args)
    with chain:
        existing_job(v, args.job_id)
        holds = _held(v, args.job_id, args.trainer)
        if not holds:
            console.print(f"job {args.job_id}: no pay held" + (f" for {', '.join(args.trainer)}" if args.trainer
                                                                 else ""))
            return 0
        failed = 0
        for t, h in holds.items():
            try:
                receipt = v.close(args.job_id, t, chain.accounts[0])
            except TransactionReverted as e:
                failed += 1
                console.print(f"  {t}: not yet ({e.error}: {escape(str(e))})", highlight=False)
                continue
            took = v.registry.events.Forfeited().process_receipt(receipt, errors=DISCARD)
            console.print(f"  {t}: {h.amount / 1e18} ETH " + ("to the client: it did not answer the challenge"
                                                             if took else "released to it"), highlight=False)
        return 1 if failed else 0


def cmd_settle(args) -> int:
    """Move a job on by the transactions anyone may send (job_view.next_move): settle it after
    the reveal deadline or once every seat has revealed (an unjoined job's payment goes back to
    the client, a decided match's job settles or asks for its next match), open the match the
    registry asks for, claim the timeout of a party whose clock ran out; repeated while one is due."""
    from ..chain.verde import PHASE_OPERATOR
    from .job_view import view
    chain, v = verde_of(args)
    with chain:
        existing_job(v, args.job_id)
        sent = 0
        for _ in range(8):  # settle -> dispute required -> open: a few moves at most
            d = view(v, args.job_id)
            n = d["next"]
            if n["action"] is None:
                break
            if n["action"] == "settle":
                v.chain.transact(v.registry.functions.settle(args.job_id), sender=chain.accounts[0])
                console.print(f"job {args.job_id}: settled ({n['why'].split(':')[0]})")
            elif n["action"] == "open":
                (a, b), _ = v.requested_match(args.job_id)
                m = v.open_match(args.job_id, a, b)
                console.print(f"job {args.job_id}: opened match {m}, {a} vs {b}")
            else:
                m = next(m["id"] for m in d["matches"] if "where" in m)
                referee = v.operators if v.match_state(m)["phase"] == PHASE_OPERATOR else v.game
                v.chain.transact(referee.functions.timeout(m), sender=chain.accounts[0])
                console.print(f"job {args.job_id}: match {m} timed out ({n['why'].split(': ', 1)[1]})")
            sent += 1
        d = view(v, args.job_id)
    n = d["next"]
    if not sent and d["status"] != "settled":
        raise ChainError(f"job {args.job_id} cannot be moved on yet ({d['phase']}): {n['why']}",
                         f"wait, then run `verde settle {args.job_id}` again (verde status {args.job_id} shows the "
                         "deadlines)")
    console.print(f"job {args.job_id}: {d['phase']}" + (f"; next: `{n['command']}` ({n['who']}): {n['why']}"
                                                        if n["command"] else f"; {n['why']}"), highlight=False)
    return 0


def cmd_withdraw(args) -> int:
    chain, v = verde_of(args)
    with chain:
        me = chain.accounts[0]
        owed = v.owed(me.address)
        if owed == 0:
            console.print(f"nothing owed to {me.address}")
            return 0
        chain.transact(v.registry.functions.withdraw(), sender=me)
        console.print(f"withdrew {owed / 1e18} ETH to {me.address}")
    return 0


def cmd_watch(args) -> int:
    """Print a job's events (joins, commitments, the dispute's narrowing, the decision) as
    they reach the chain; stop once it is settled unless --follow. A node that goes away
    (restarted) is waited for up to --offline-s, as the agents wait; the events resume where
    they stopped."""
    from ..agent.watcher import Watcher
    from ..chain.errors import ChainUnavailable
    chain, v = verde_of(args)
    with chain:
        existing_job(v, args.job_id)
        w = Watcher(v, args.job_id)
        down_since = None
        while True:
            try:
                lines = w.poll()
                if down_since is not None:
                    if not chain.w3.eth.get_code(v.registry.address):
                        raise ChainError(f"the node came back without the contracts (no code at "
                                         f"{v.registry.address}): its chain was reset",
                                         "restart the node with its saved state (verde node --state FILE)")
                    console.print(f"[green]the node is back[/] after {time.time() - down_since:.0f} s")
                    down_since = None
            except (ChainUnavailable, OSError) as e:
                if down_since is None:
                    down_since = time.time()
                    console.print(f"[yellow]lost the node[/] ({type(e).__name__}); waiting for it up to "
                                  f"{args.offline_s:g} s (--offline-s)", highlight=False)
                elif time.time() - down_since > args.offline_s:
                    raise ChainError(f"the node did not answer for {args.offline_s:g} s",
                                     f"restart it (with its state: verde node --state FILE), then `verde watch "
                                     f"{args.job_id}` again") from None
                time.sleep(min(2.0, args.poll_s * 4))
                continue
            for line in lines:
                console.print(line, highlight=False)
            if not args.follow and any(name == "Settled" for _, name, _ in w.events):
                return 0
            time.sleep(args.poll_s)


def add(sub):
    q = sub.add_parser("post", help="post a job file with its payment")
    chain_args(q)
    q.add_argument("job", help="the job file (YAML or JSON)")
    q.add_argument("--payment", type=eth, required=True, help="ETH paid to the accepted trainers")
    q.add_argument("--stake", type=eth, required=True, help="ETH each trainer stakes")
    q.add_argument("--max-trainers", type=bounded(1, 255), default=3, help="seats (1-255)")
    from .profiles import LOCAL, PUBLIC
    for flag, attr, what in (("--join-s", "join_s", "seconds to join"),
                             ("--train-s", "train_s", "seconds after the join deadline to commit a result"),
                             ("--reveal-s", "reveal_s", "seconds after that to reveal it"),
                             ("--clock-s", "clock_s", "each party's dispute clock, in seconds")):
        q.add_argument(flag, type=int, default=None, help=f"{what} (default {getattr(PUBLIC, attr)}; on a local chain "
                                                          f"{getattr(LOCAL, attr)}; at least the registry's floor)")
    q.add_argument("--only", action="append", type=address, metavar="ADDRESS",
                   help="only this trainer may join (repeat for several; e.g. your own honest trainer among them): "
                        "protects the job from one party holding every seat")
    q.set_defaults(fn=cmd_post)
    for name, fn, what in (("status", cmd_status, "show a job's state"),
                           ("watch", cmd_watch, "follow a job's events until it is settled")):
        q = sub.add_parser(name, help=what)
        chain_args(q)
        q.add_argument("job_id", type=int)
        q.set_defaults(fn=fn)
        if name == "watch":
            q.add_argument("--follow", action="store_true", help="keep watching after the job is settled")
            q.add_argument("--poll-s", type=float, default=1.0)
            q.add_argument("--offline-s", type=float, default=600,
                           help="how long to wait for a node that went away before giving up (default 600)")
        else:
            q.add_argument("--json", action="store_true", help="the same as JSON, for scripts")
    q = sub.add_parser("fetch", help="take a job's accepted model from a result store, checked against the chain")
    chain_args(q)
    q.add_argument("job_id", type=int)
    q.add_argument("job", help="the job file that was posted")
    q.add_argument("--from", dest="store", required=True, help="the result store: a directory the trainer publishes "
                   "to, or its URL (http://HOST:PORT, `verde agent --serve`; any static file server of that directory)")
    q.add_argument("--out", default="model.safetensors")
    q.add_argument("--with-optimizer", action="store_true", help="keep the optimizer state too")
    q.set_defaults(fn=cmd_fetch)
    q = sub.add_parser("challenge", help="ask an accepted trainer to put chunks of the result on chain (every "
                                         "chunk a store lacks, a range, or a random one), or lose its held pay to you")
    chain_args(q)
    q.add_argument("job_id", type=int)
    q.add_argument("job", help="the job file that was posted")
    q.add_argument("--trainer", type=address, required=True, help="the accepted trainer's address")
    q.add_argument("--from", dest="store", help="the result store you fetched from: ask for every chunk it lacks "
                                                "(all of a tensor that is missing or does not verify)")
    q.add_argument("--tensor", help="a state tensor's name or index (default: random)")
    q.add_argument("--chunk", type=bounded(0, 2**32 - 1), help="its first chunk index (default: random)")
    q.add_argument("--count", type=bounded(1, 2**16), default=1, help="chunks from --chunk on (default 1)")
    q.add_argument("--max-bond", type=eth, default=10**18,
                   help="refuse to pay more than this many ETH of bonds (default 1)")
    q.set_defaults(fn=cmd_challenge)
    q = sub.add_parser("release", help="end a job's delivery holds: pay the trainers (the client at any time, "
                                       "anyone after the window), or refund an unanswered challenge to the client")
    chain_args(q)
    q.add_argument("job_id", type=int)
    q.add_argument("--trainer", action="append", type=address, metavar="ADDRESS", help="only this trainer (repeat)")
    q.set_defaults(fn=cmd_release)
    q = sub.add_parser("settle", help="move a job on (anyone): settle it after the reveal deadline or once every "
                                      "seat revealed (refunds a job nobody joined), open its requested match, time "
                                      "out a party out of time")
    chain_args(q)
    q.add_argument("job_id", type=int)
    q.set_defaults(fn=cmd_settle)
    q = sub.add_parser("withdraw", help="withdraw what the registry owes your key")
    chain_args(q)
    q.set_defaults(fn=cmd_withdraw)
