"""Follows one job on chain, from the outside: what a client, an auditor or the demo sees.
It reads only the chain (events and transactions of the three contracts), so it can run
anywhere, start late, and survive a node restart. `Watcher.poll` returns what happened
since the last poll as lines for people; `moves()` lists every transaction of the job's
disputes with its level and gas, for the report."""
from __future__ import annotations

from dataclasses import dataclass, field

from eth_utils import event_abi_to_log_topic, function_abi_to_4byte_selector

# which level each game move belongs to; postChildren is level 2 in DisputeGame and 3
# (kernel descent) or 4 (chunk descent) in OperatorGame, by the phase it was sent in
LEVEL_OF = {"open": 1, "postClaims": 1, "timeout": None, "openStep": 2, "postTop": 2, "postNode": 2,
            "resolveInput": 2, "postStateLeaf": 2, "resolveState": 2, "postKernelTop": 3, "postKernel": 3, "showFault": None,
            "showEarlierFault": 2, "postTensorTop": 4, "postChunk": 4, "resolveOperand": 4, "resolveStep": 5}


@dataclass
class Move:
    block: int
    sender: str
    name: str
    gas: int
    level: int


def gas_by_level(moves: list[Move]) -> dict[int, int]:
    out: dict[int, int] = {}
    for m in moves:
        out[m.level] = out.get(m.level, 0) + m.gas
    return out


def levels_of(names: list[str]) -> list[int]:
    """The level of each move, in order: a move is at the level the game is in (postChildren
    and timeout take the level of the move before them)."""
    out, level = [], 1
    for name in names:
        lv = LEVEL_OF.get(name)
        if lv is not None:
            level = lv
        out.append(level)
    return out


@dataclass
class Watcher:
    verde: object
    job_id: int
    next_block: int = 0
    matches: set = field(default_factory=set)
    events: list = field(default_factory=list)  # (block, event name, args), in chain order

    def __post_init__(self):
        v = self.verde
        self.next_block = max(self.next_block, v.from_block)  # nothing of ours before the deployment
        self._contracts = {c.address: c for c in (v.registry, v.game, v.operators)}
        self._topics = {event_abi_to_log_topic(e): (c, e["name"]) for c in self._contracts.values()
                        for e in c.abi if e["type"] == "event"}

    def poll(self) -> list[str]:
        """New events of this job since the last poll, as lines."""
        w3 = self.verde.chain.w3
        latest = w3.eth.block_number
        if latest < self.next_block:
            return []
        logs = w3.eth.get_logs({"fromBlock": self.next_block, "toBlock": latest, "address": list(self._contracts)})
        self.next_block = latest + 1
        lines = []
        for log in logs:
            hit = self._topics.get(bytes(log["topics"][0]))
            if hit is None:
                continue
            contract, name = hit
            args = dict(contract.events[name]().process_log(log)["args"])
            if not self._ours(name, args):
                continue
            self.events.append((log["blockNumber"], name, args))
            lines.append(f"block {log['blockNumber']}: {describe(name, args)}")
        return lines

    def _ours(self, name: str, args: dict) -> bool:
        if name == "MatchOpened":
            if args["job"] != self.job_id:
                return False
            self.matches.add(args["id"])
            return True
        if "id" not in args:  # Withdrawn: per address, not per job
            return False
        return args["id"] in self.matches if name not in REGISTRY_EVENTS else args["id"] == self.job_id

    def moves(self) -> list[Move]:
        """Every transaction sent to the two games for this job's matches (`open` included),
        in order, with its level and gas."""
        if not self.events:
            return []
        w3 = self.verde.chain.w3
        selectors = {}
        for c in (self.verde.game, self.verde.operators):
            for f in c.abi:
                if f["type"] == "function":
                    selectors[(c.address, function_abi_to_4byte_selector(f))] = f["name"]
        first = min(b for b, name, _ in self.events if name == "MatchOpened") if self.matches else self.next_block
        raw = []
        for n in range(first, self.next_block):
            for tx in w3.eth.get_block(n, full_transactions=True)["transactions"]:
                name = selectors.get((tx["to"], bytes(tx["input"][:4])))
                if name is None or not self._for_our_match(tx, name):
                    continue
                raw.append((n, tx["from"], name, w3.eth.get_transaction_receipt(tx["hash"])["gasUsed"]))
        return [Move(b, s, name, g, lv) for (b, s, name, g), lv in zip(raw, levels_of([r[2] for r in raw]))]

    def _for_our_match(self, tx, name: str) -> bool:
        """Every game function takes the match id first, except `open` (job id first)."""
        arg = int.from_bytes(bytes(tx["input"][4:36]), "big")
        return arg == self.job_id if name == "open" else arg in self.matches

    def bisection_path(self) -> list[tuple[int, int, str]]:
        """The narrowing, in order, as (block, level, what was found): each step round's
        (lo, hi], the step, node, kernel, tensor and element found, and the decision."""
        out = []
        for block, name, a in self.events:
            what = PATH.get(name)
            if what is not None:
                out.append((block, *what(a)))
        return out


PATH = {
    "StepRound": lambda a: (1, f"steps ({a['lo']}, {a['hi']}]"),
    "StepFound": lambda a: (1, f"step {a['step']}"),
    "NodeFound": lambda a: (2, f"node {a['node']}"),
    "Disagreement": lambda a: (2, f"{'state tensor' if a['stateTensor'] else 'input'} {a['index']}"),
    "KernelFound": lambda a: (3, f"kernel {a['kernel']}"),
    "TensorDisputed": lambda a: (4, "its output" if a["operand"] < 0 else f"operand {a['operand']}"),
    "ElementFound": lambda a: (4, f"element {a['flat']}"),
    "MatchDecided": lambda a: (a["level"], f"decided at level {a['level']}"),
    "MatchDrawn": lambda a: (a["level"], f"drawn at level {a['level']} (both out of time)"),
}


REGISTRY_EVENTS = ("JobPosted", "Joined", "Committed", "Revealed", "DisputeRequired", "Decided", "Drawn", "Forfeited",
                   "Settled", "Held", "DeliveryChallenged", "DeliveryAnswered", "Released")


def _short(x) -> str:
    if isinstance(x, (bytes, bytearray)):
        return "0x" + bytes(x).hex()[:12] + "…"
    if isinstance(x, str) and x.startswith("0x") and len(x) == 42:
        return x[:8] + "…"
    if isinstance(x, (list, tuple)):
        return "[" + ", ".join(_short(v) for v in x) + "]"
    return str(x)


def utc(t: int) -> str:
    """A chain time as `verde status` prints it."""
    import datetime as dt
    return dt.datetime.fromtimestamp(int(t), dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _eth(wei: int) -> str:
    return f"{wei / 1e18} ETH"


WEI = ("payment", "stake", "paid", "refunded", "amount")  # event fields in wei, printed in ETH
TIMES = ("until", "due")  # event fields that are chain times, printed in UTC


def _value(key: str, v) -> str:
    if key in WEI and isinstance(v, int):
        return _eth(v)
    if key in TIMES and isinstance(v, int):
        return utc(v)
    return _short(v)


LINES = {
    "JobPosted": lambda a: f"job {a['id']} posted by {_short(a['client'])}: payment {_eth(a['payment'])}, stake "
                           f"{_eth(a['stake'])} per trainer (spec {_short(a['specHash'])})",
    "Joined": lambda a: f"{_short(a['trainer'])} joins (its stake is in)",
    "Committed": lambda a: f"{_short(a['trainer'])} commits its sealed result",
    "Revealed": lambda a: f"{_short(a['trainer'])} reveals its result {_short(a['claim'])}",
    "Settled": lambda a: f"job {a['id']} settled: " + (f"result {_short(a['accepted'])} accepted, "
                                                       f"{a['paidTrainers']} trainer(s) paid" if a["paidTrainers"]
                                                       else "no result; the payment and any stakes go back to the "
                                                       "client (verde withdraw)"),
    "FaultAccepted": lambda a: f"job {a['id']}: a FAULT at step {a['step']} accepted: {_eth(a['paid'])} to the "
                               f"trainers for the steps before it, {_eth(a['refunded'])} back to the client",
    "StepRound": lambda a: f"match {a['id']}: steps ({a['lo']}, {a['hi']}] split at {list(a['points'])}",
    "MatchDecided": lambda a: f"match {a['id']} decided at level {a['level']}: {_short(a['winner'])} wins, "
                              f"{_short(a['loser'])} loses ({a['reason']})",
    "MatchDrawn": lambda a: f"match {a['id']} drawn at level {a['level']}: {_short(a['a'])} and {_short(a['b'])} "
                            "both ran out of time; both stakes go to the pot",
    "Forfeited": lambda a: f"{_short(a['trainer'])} forfeits its stake of {_eth(a['stake'])} ({a['why']})",
    "Held": lambda a: f"{_short(a['trainer'])}'s {_eth(a['amount'])} held for delivery until {utc(a['until'])} "
                      "(the client may challenge it, or release it sooner)",
    "DeliveryChallenged": lambda a: f"the client asks {_short(a['trainer'])} for chunks {a['first']}-"
                                    f"{a['first'] + a['count'] - 1} of state tensor {a['tensor']} on chain by "
                                    f"{utc(a['due'])}",
    "DeliveryAnswered": lambda a: f"chunk {a['chunk']} of state tensor {a['tensor']} delivered on chain for "
                                  f"{_short(a['trainer'])} ({len(a['data'])} bytes, proven against the result)",
    "Released": lambda a: f"{_short(a['trainer'])}'s {_eth(a['amount'])} released (delivery hold over)",
    "ChunkPosted": lambda a: f"match {a['id']}: party {a['party']} posted its chunk ({len(a['chunk'])} bytes)",
}


def describe(name: str, args: dict) -> str:
    if name in LINES:
        return LINES[name](args)
    return f"{name} " + ", ".join(f"{k}={_value(k, v)}" for k, v in args.items())
