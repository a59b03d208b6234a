"""`verde` commands of a client (and anyone watching): post a job, its status and events,
withdraw what the registry owes a key (trainers withdraw their pay the same way)."""
from __future__ import annotations

import time

from ..chain import ChainError
from .common import STATUS, address, bounded, chain_args, console, eth, existing_job, load_job, step, verde_of


def cmd_post(args) -> int:
    from ..dispute.context import Context
    job = load_job(args.job)
    chain, v = verde_of(args)
    with chain:
        behind = time.time() - chain.now()
        if behind > 60:
            console.print(f"[yellow]warning:[/] the chain's clock is {behind:.0f} s behind this machine's (its last "
                          "block is that old: an idle node that mines only on transactions); the deadlines count "
                          "from the chain's clock and pass unseen while it stands still\n"
                          "  Fix: run the node with a block time (`verde node --block-time 2`, the default)")
        step(f"committing to job {job.job_id.hex()[:16]}… (graph, data, kernel structures: one traced step)")
        jid = v.post(job, Context(job), args.payment, args.stake, max_trainers=args.max_trainers,
                     join_s=args.join_s, commit_s=args.join_s + args.train_s,
                     reveal_s=args.join_s + args.train_s + args.reveal_s, clock_s=args.clock_s,
                     client=chain.accounts[0], only=args.only)
        who = f"; only {', '.join(args.only)} may join" if args.only else ""
        console.print(f"posted job {jid} (payment {args.payment / 1e18} ETH, stake {args.stake / 1e18} ETH{who})")
    return 0


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
        claim = bytes(j[3])
    try:
        state = verify(job, args.store, claim)
    except DeliveryError as e:
        raise ChainError(str(e), "ask the accepted trainer to publish (its agent writes to WORKDIR/published), or "
                                 "point --from at its store") from None
    out = state if args.with_optimizer else model_tensors(state)
    save_file(out, args.out)
    console.print(f"job {args.job_id}: the accepted result {claim.hex()[:16]}… checked ({len(state)} tensors, every "
                  f"chunk against its commitment); wrote {len(out)} tensors to {args.out}")
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
    they reach the chain; stop once it is settled unless --follow."""
    from ..agent.watcher import Watcher
    chain, v = verde_of(args)
    with chain:
        existing_job(v, args.job_id)
        w = Watcher(v, args.job_id)
        while True:
            for line in w.poll():
                console.print(line)
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
    q.add_argument("--join-s", type=int, default=600, help="seconds to join")
    q.add_argument("--train-s", type=int, default=3600, help="seconds after joining to commit a result")
    q.add_argument("--reveal-s", type=int, default=600, help="seconds after that to reveal it")
    q.add_argument("--clock-s", type=int, default=3600, help="each party's dispute clock")
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
        else:
            q.add_argument("--json", action="store_true", help="the same as JSON, for scripts")
    q = sub.add_parser("fetch", help="take a job's accepted model from a result store, checked against the chain")
    chain_args(q)
    q.add_argument("job_id", type=int)
    q.add_argument("job", help="the job file that was posted")
    q.add_argument("--from", dest="store", required=True, help="the result store (a directory the trainer publishes to)")
    q.add_argument("--out", default="model.safetensors")
    q.add_argument("--with-optimizer", action="store_true", help="keep the optimizer state too")
    q.set_defaults(fn=cmd_fetch)
    q = sub.add_parser("withdraw", help="withdraw what the registry owes your key")
    chain_args(q)
    q.set_defaults(fn=cmd_withdraw)
