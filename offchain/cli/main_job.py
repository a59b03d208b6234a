"""The main job, as users meet it: a local chain shared by separate processes (the
embedded chain served by a child process, or Anvil), the contracts deployed, a real job
posted (the Llama-style model on the repository's own text), two honest trainer agents
and a cheating one started as `verde agent` processes with their own keys, state and
logs. They train, commit, reveal, settle, dispute, publish and withdraw by themselves;
this process is the client and a watcher: once the job settles it takes its model from the
honest agent's result store (checked against the accepted claim), spot-checks the other
accepted trainer on chain (a delivery challenge its agent answers), and releases their
held pay. Every seat taken, the registry opens the reveal once all have committed and the
settlement once all have revealed; were a seat left free, this process would move the local
chain's clock past the commit and reveal deadlines once every trainer has acted, instead of
waiting for them in real time."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from ..agent.watcher import Watcher, gas_by_level
from ..chain.anvil import die_with_parent

PAY, STAKE = 3 * 10**18, 10**18
JOIN_S, TRAIN_S, REVEAL_S = 3600, 7200, 3600  # windows; the client fast-forwards through them
DELIVERY = (3600, 600)  # the accepted pay is held this long for delivery; the client releases it once it has the model


@dataclass
class AgentProc:
    name: str
    behaviour: str
    account: object
    workdir: Path
    proc: subprocess.Popen | None = None

    @property
    def log(self) -> Path:
        return self.workdir / "agent.log"

    def start(self, url: str, deployment: Path, job_file: Path):
        """No job id: the agent waits for its job file's job to be posted, checks its terms, joins."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "VERDE_PRIVATE_KEY": self.account.key.hex(), "OMP_NUM_THREADS": "1"}
        with open(self.log, "a") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "offchain.cli", "agent", str(job_file), "--chain", f"rpc:{url}",
                 "--deployment", str(deployment), "--workdir", str(self.workdir), "--behaviour", self.behaviour,
                 "--name", self.name, "--poll-s", "0.3"],
                env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                preexec_fn=die_with_parent)  # even a SIGKILLed main job leaves no agent behind

    def tail(self, n: int = 2500) -> str:
        return self.log.read_text(errors="replace")[-n:] if self.log.exists() else ""

    def losses(self) -> dict[int, float]:
        f = self.workdir / "trainer" / "losses.json"
        return {int(k): v for k, v in json.loads(f.read_text()).items()} if f.exists() else {}

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def run(chain_spec: str, job_file: Path, job, ctx, workdir: Path, cheat: str, report: Path,
        console: Console, primitive_gas: int, timeout_s: float = 1800) -> int:
    """-> failures (0 when the honest agents are paid and the cheater is slashed).
    primitive_gas: what one soft-float primitive costs on chain (measured by the caller),
    to price re-running the job against the dispute."""
    from ..chain import ChainError, connect
    from ..chain.verde import Delivery, Verde

    spec = {"embedded": "embedded-node"}.get(chain_spec, chain_spec)
    if not (spec.startswith("embedded-node") or spec.startswith("anvil")):
        raise ChainError(f"the main job starts its own local chain; {chain_spec!r} is not one",
                         "use --chain embedded (default) or --chain anvil")
    t0 = time.time()
    with connect(spec) as chain:
        url = chain._closer.url
        console.print(f"    chain: {chain.backend} at {url} (its own process), chain id {chain.chain_id}")
        v = Verde.deploy(chain, delivery=Delivery(*DELIVERY))
        deployment = workdir / "deployment.json"
        deployment.write_text(json.dumps(v.addresses(), indent=1))
        agents = [AgentProc("honest", "honest", chain.accounts[2], workdir / "honest"),
                  AgentProc("honest-2", "honest", chain.accounts[3], workdir / "honest-2"),
                  AgentProc("cheater", cheat, chain.accounts[4], workdir / "cheater")]
        names = {a.account.address: a.name for a in agents}
        try:
            for a in agents:
                a.start(url, deployment, job_file)
            console.print("    agents started, waiting for the job: " + ", ".join(
                f"{a.name} (pid {a.proc.pid}, {a.behaviour}, log {a.log})" for a in agents))
            jid = v.post(job, ctx, PAY, STAKE, max_trainers=3, join_s=JOIN_S, commit_s=JOIN_S + TRAIN_S,
                         reveal_s=JOIN_S + TRAIN_S + REVEAL_S, client=chain.accounts[1])
            console.print(f"    job {jid} posted: payment {PAY / 1e18:.0f} ETH, stake {STAKE / 1e18:.0f} ETH, "
                          f"{len(ctx.kernel_graph.structures)} nodes and "
                          f"{sum(map(len, ctx.kernel_graph.structures)):,} kernels per step committed")
            watcher = Watcher(v, jid)
            client = Client(v, jid, job, chain.accounts[1], agents, model_path(report), console)
            t_train = _follow(chain, v, jid, agents, watcher, names, console, t0 + timeout_s, client)
        finally:
            for a in agents:
                a.stop()
        t_end = time.time()
        return _report(v, jid, job, agents, watcher, names, console, report, t0, t_train, t_end, primitive_gas)


def model_path(report: Path) -> Path:
    """The demo's model: beside its report (the current directory or --workdir), never in a
    temporary directory that is removed when the demo ends."""
    return report.with_name("verde-model.safetensors")


@dataclass
class Client:
    """The client's part after settlement: take the model, spot-check the other accepted
    trainer on chain, release the held pay. One step per call, so the watcher keeps
    printing between them."""
    v: object
    jid: int
    job: object
    account: object
    agents: list
    out: Path  # where the client writes the model it took (beside the report: it outlives a temporary workdir)
    console: Console
    stage: str = "fetch"
    model: Path | None = None

    def step(self, deadline: float):
        from ..protocol.delivery import DeliveryError, model_tensors, verify
        v, jid = self.v, self.jid
        if self.stage == "fetch":
            store = self.agents[0].workdir / "published"  # the honest agent's store
            try:
                state = verify(self.job, store, bytes(v.status(jid)[3]))
            except DeliveryError:
                if time.time() > deadline:
                    raise
                return  # not published yet
            from safetensors.torch import save_file
            self.model = self.out
            save_file(model_tensors(self.job, state), str(self.model))
            self.console.print(f"    client: took its model from {store}: {len(state)} tensors, every chunk checked "
                               f"against the accepted claim; wrote {self.model}")
            self.stage = "challenge"
        elif self.stage == "challenge":
            other = self.agents[1].account.address
            if not v.hold(jid, other).amount:
                self.stage = "release"
                return
            from ..chain.verde import STATE_COUNT
            tensor = int.from_bytes(os.urandom(2), "big") % v.status(jid)[4][STATE_COUNT]
            v.challenge(jid, other, tensor, 0, self.account)
            self.console.print(f"    client: spot-checks {self.agents[1].name}'s delivery: chunk 0 of state tensor "
                               f"{tensor}, on chain")
            self.stage = "answered"
        elif self.stage == "answered":
            if not v.hold(jid, self.agents[1].account.address).due:
                self.stage = "release"
        elif self.stage == "release":
            for a in self.agents:
                if v.hold(jid, a.account.address).amount:
                    v.close(jid, a.account.address, self.account)
            self.console.print("    client: has its model; released the accepted trainers' held pay")
            self.stage = "done"


def _follow(chain, v, jid, agents, watcher, names, console, deadline, client=None) -> float:
    """Print the job's events as they come; move the clock past each deadline once every
    agent has acted; once it settles, let the client take its model; return when every
    agent has exited. -> when training ended (all committed)."""
    from ..chain.verde import COMMIT_BY, REVEAL_BY
    terms = v.status(jid)[4]
    t_train = None
    while True:
        for line in watcher.poll():
            console.print("    " + _named(line, names))
        committed = {a["trainer"] for _, name, a in watcher.events if name == "Committed"}
        revealed = {a["trainer"] for _, name, a in watcher.events if name == "Revealed"}
        if len(committed) == len(agents):
            t_train = t_train or time.time()
        # every seat taken and sealed opens the reveal, every seat revealed the settlement (the registry's
        # early windows); the clock moves only where a seat was left free
        settling = any(n in ("Settled", "DisputeRequired") for _, n, _ in watcher.events)
        if len(committed) == len(agents) and not revealed and chain.now() < terms[COMMIT_BY] \
                and not v.reveal_open(jid, terms, chain.now()):
            console.print("    [dim]client: every trainer committed; moving the local chain's clock past the "
                          "commit deadline[/]")
            chain.advance(terms[COMMIT_BY] - chain.now() + 1)
        if len(revealed) == len(agents) and not settling and not v.settle_open(jid, terms, chain.now()):
            console.print("    [dim]client: every result revealed; moving the clock past the reveal deadline[/]")
            chain.advance(terms[REVEAL_BY] - chain.now() + 1)
        if client is not None and client.stage != "done" and any(n == "Settled" for _, n, _ in watcher.events):
            client.step(deadline)
        failed = [a for a in agents if a.proc.poll() not in (None, 0)]
        if failed:
            a = failed[0]
            raise RuntimeError(f"agent {a.name} exited with code {a.proc.returncode}; its log ends:\n{a.tail()}")
        if all(a.proc.poll() == 0 for a in agents):
            for line in watcher.poll():
                console.print("    " + _named(line, names))
            return t_train or time.time()
        if time.time() > deadline:
            raise TimeoutError("the job did not finish in time; agent logs:\n" +
                               "\n".join(f"--- {a.name}\n{a.tail(1200)}" for a in agents))
        time.sleep(0.3)


def _named(line: str, names: dict) -> str:
    for address, name in names.items():
        line = line.replace(address[:8] + "…", name)
    return line


def _report(v, jid, job, agents, watcher, names, console, png, t0, t_train, t_end, primitive_gas) -> int:
    events = watcher.events
    settled = [a for _, n, a in events if n == "Settled"]
    decided = [a for _, n, a in events if n == "MatchDecided"]
    paid = {names.get(a["to"], a["to"]): a["amount"] for a in _withdrawals(v, names)}
    moves = watcher.moves()
    per_level = gas_by_level(moves)
    counts = Counter(m.level for m in moves)

    t = Table("level", "moves", "gas", title=f"on-chain dispute of job {jid}")
    for lv in sorted(per_level):
        t.add_row(str(lv), str(counts[lv]), f"{per_level[lv]:,}")
    t.add_row("total", str(len(moves)), f"{sum(per_level.values()):,}")
    console.print(t)
    for d in decided:
        console.print(f"    match {d['id']}: {names.get(d['winner'])} wins, {names.get(d['loser'])} slashed "
                      f"(stake {STAKE / 1e18:.0f} ETH to the pot the accepted trainers share), decided at level {d['level']}: "
                      f"{d['reason']}")
    if settled:
        console.print(f"    accepted result: C_T = 0x{bytes(settled[0]['accepted']).hex()[:16]}…, "
                      f"paid {settled[0]['paidTrainers']} trainer(s)")
    for a in (a for _, n, a in events if n == "DeliveryAnswered"):
        console.print(f"    delivery: {names.get(a['trainer'])} answered the client's challenge on chain (chunk "
                      f"{a['chunk']} of state tensor {a['tensor']}, proven against the accepted claim)")
    console.print("    withdrawn (payment share + stakes): " +
                  ", ".join(f"{a.name} {paid.get(a.name, 0) / 1e18:.2f} ETH" for a in agents))
    console.print(f"    largest transaction {max((m.gas for m in moves), default=0):,} gas")
    from ..trainer import Trainer
    with tempfile.TemporaryDirectory() as tmp:
        ops = Trainer(job, Path(tmp), "count").primitive_ops() * job.spec.steps
    console.print(f"    referee work vs re-running: the chain executed 1 binary32 primitive (+ Merkle proofs) where "
                  f"re-running the job is {ops:,} primitive operations (~{ops * primitive_gas / 1e6:,.0f}M gas at "
                  f"{primitive_gas:,} gas each, the dearest primitive's median measured above, vs {sum(per_level.values()) / 1e6:.1f}M for the whole dispute)")
    console.print(f"    wall time {t_end - t0:.0f} s: training {t_train - t0:.0f} s, reveal + dispute + withdraw "
                  f"{t_end - t_train:.0f} s")
    headline = "; ".join(
        [f"accepted C_T 0x{bytes(settled[0]['accepted']).hex()[:12]}…" if settled else "no result accepted"]
        + [f"{names.get(d['winner'])} beat {names.get(d['loser'])} (slashed) at level {d['level']}" for d in decided])
    from .report import draw, timeline
    curves = [(f"{a.name} ({a.behaviour.split(':')[0]})", a.losses(), a.behaviour == "honest") for a in agents]
    draw(png, curves, watcher.bisection_path(), per_level, headline, timeline(v, jid, watcher, names))
    console.print(f"    wrote {png}")
    honest = [a.name for a in agents if a.behaviour == "honest"]
    ok = (settled and decided and all(paid.get(n, 0) > 0 for n in honest)
          and all(paid.get(a.name, 0) == 0 for a in agents if a.name not in honest))
    return 0 if ok else 1


def _withdrawals(v, names) -> list[dict]:
    logs = v.registry.events.Withdrawn().get_logs(from_block=v.from_block)
    return [dict(e["args"]) for e in logs if e["args"]["to"] in names]
