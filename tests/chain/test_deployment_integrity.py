"""A deployment file may be written by the client a trainer works for. Verde.attach (every
agent start, every CLI call) and an agent before it stakes check that its contracts are
Verde's (chain/integrity.py): our runtime code, immutables of one value each, wired to each
other, created by our constructors. A registry whose game is the client's key, a game of
other code, contracts wired to others, or our code created by other init code (storage the
client wrote) are refused, naming what differs; an agent given one stakes nothing."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from eth_utils import keccak

from offchain.agent.trainer_agent import TrainerAgent
from offchain.chain import connect
from offchain.chain.errors import DeploymentError
from offchain.chain.integrity import check_deployment
from offchain.chain.verde import Delivery, Floors, Verde, commitments

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "protocol"))
from small_job import write_small_job  # noqa: E402

ETH = 10**18


def _registry_args(game: str) -> tuple:
    f, d = Floors(), Delivery()
    return game, f.clock_s, f.commit_window_s, f.reveal_window_s, d.window_s, d.answer_s, d.bond_wei


def _returning(runtime: bytes, stores=()) -> bytes:
    """Init code that writes storage `stores` ((slot, value), ...) and then returns `runtime`
    as the new contract's code: what any deployer may send."""
    pre = b"".join(b"\x7f" + v.to_bytes(32, "big") + b"\x7f" + s.to_bytes(32, "big") + b"\x55" for s, v in stores)
    n, at = len(runtime), len(pre) + 13
    # PUSH2 n, DUP1, PUSH2 at, PUSH1 0, CODECOPY (to 0, from at, n bytes), PUSH1 0, RETURN (0, n)
    return pre + b"\x61" + n.to_bytes(2, "big") + b"\x80\x61" + at.to_bytes(2, "big") + b"\x60\x00\x39\x60\x00\xf3" + \
        runtime


def _raw_create(chain, init: bytes, sender) -> tuple[str, str]:
    """-> (the address, the creating transaction's hash)."""
    r = chain._send("deploy hostile code", {"data": init, "value": 0}, sender)
    return r["contractAddress"], "0x" + bytes(r["transactionHash"]).hex()


def _hostile(chain, client, registry_game=None, game=None, operators=None, executor=None, set_up=True) -> dict:
    """A deployment the client made: genuine contracts unless told otherwise. registry_game:
    the registry's `game` (default: the deployment's game); game: (address, creating tx) of a
    DisputeGame (default: a genuine one); operators: an address for the deployment's operators
    (default: a genuine OperatorGame of the game, whose executor is `executor`)."""
    created = {}
    if game is None:
        g, r = chain.create("DisputeGame", sender=client)
        game = (g.address, "0x" + bytes(r["transactionHash"]).hex())
    game, created["game"] = game
    if operators is None:
        ex = executor or chain.deploy("Executor", sender=client).address
        o, r = chain.create("OperatorGame", game, ex, sender=client)
        operators, created["operators"] = o.address, "0x" + bytes(r["transactionHash"]).hex()
    else:
        operators, created["operators"] = operators
    reg, r = chain.create("JobRegistry", *_registry_args(registry_game or game), sender=client)
    created["registry"] = "0x" + bytes(r["transactionHash"]).hex()
    if set_up:
        g = chain.w3.eth.contract(address=game, abi=chain.artifacts["DisputeGame"].abi)
        chain.transact(g.functions.setUp(reg.address, operators), sender=client)
    return {"chain_id": chain.chain_id, "registry": reg.address, "game": game, "operators": operators,
            "from_block": 0, "created": created}


@pytest.fixture(scope="module")
def embedded_chain(artifacts):
    with connect("embedded", artifacts) as chain:
        yield chain


def test_an_honest_deployment_attaches(chain):
    """Embedded and Anvil: what `verde deploy` writes (through JSON) attaches, and a deployment
    the client made of genuine contracts, wired right, is as good as ours."""
    v = Verde.deploy(chain)
    w = Verde.attach(chain, json.loads(json.dumps(v.addresses())))
    assert (w.registry.address, w.game.address, w.operators.address) == (v.registry.address, v.game.address,
                                                                         v.operators.address)
    assert w.verified and w.addresses() == v.addresses()
    check_deployment(chain, _hostile(chain, chain.accounts[1]))


def test_a_registry_whose_game_is_the_clients_key_is_refused(embedded_chain):
    chain, client = embedded_chain, embedded_chain.accounts[1]
    dep = _hostile(chain, client, registry_game=client.address)
    with pytest.raises(DeploymentError, match=rf"the JobRegistry at {dep['registry']} takes dispute decisions from "
                       rf"{client.address} \(its immutable `game`\).*an account with no code"):
        Verde.attach(chain, dep)
    # the file naming the key as its game too: no DisputeGame there
    dep = {**dep, "game": client.address}
    with pytest.raises(DeploymentError, match=rf"(?s)no DisputeGame at '{client.address}'.*Fix: .*verde deploy"):
        Verde.attach(chain, dep)


def _flip(code: bytes, at: int) -> bytes:
    return code[:at] + bytes([code[at] ^ 0xFF]) + code[at + 1:]


@pytest.mark.parametrize("variant,says", [
    ("one byte", r"other code \((\d+) bytes, ours \1; the first difference at byte 100\)"),
    ("Executor", r"other code \(\d+ bytes, ours \d+; the first difference at byte"),
    ("metadata", r"the same instructions as ours, compiled from other source text \(its metadata hash differs\)")])
def test_a_dispute_game_of_other_code_is_refused(embedded_chain, variant, says):
    """The game's code: ours with one instruction byte changed, another of our contracts, or
    ours built from other sources (only the metadata hash differs), each wired as a real
    game would be (the registry's game, set up, an OperatorGame of it)."""
    chain, client = embedded_chain, embedded_chain.accounts[1]
    ours = chain.artifacts["DisputeGame"].deployed_bytecode
    runtime = {"one byte": _flip(ours, 100), "Executor": chain.artifacts["Executor"].deployed_bytecode,
               "metadata": _flip(ours, len(ours) - 10)}[variant]
    game = _raw_create(chain, _returning(runtime), client)
    dep = _hostile(chain, client, game=game, set_up=False)
    with pytest.raises(DeploymentError, match=rf"the code at {game[0]} \(the deployment's game\) is not Verde's "
                       rf"DisputeGame: {says}"):
        Verde.attach(chain, dep)


def test_a_registry_with_two_values_of_its_game_is_refused(embedded_chain):
    """Our JobRegistry's runtime code holds `game` in two places (its getter and decide's
    caller check). Init code of the client's may fill them with different addresses: game()
    reports the real game while the other place lets the client's key decide."""
    chain, client = embedded_chain, embedded_chain.accounts[1]
    dep = _hostile(chain, client)
    code = bytes(chain.w3.eth.get_code(dep["registry"]))
    (_, _, places), = [i for i in chain.artifacts["JobRegistry"].immutables if i[0] == "game"]
    assert len(places) == 2
    reported = []
    for s, n in places:
        runtime = code[:s] + bytes(12) + bytes.fromhex(client.address[2:]) + code[s + n:]
        address, tx = _raw_create(chain, _returning(runtime), client)
        reg = chain.w3.eth.contract(address=address, abi=chain.artifacts["JobRegistry"].abi)
        reported.append(chain.call(reg.functions.game()))
        with pytest.raises(DeploymentError, match=rf"the code at {address} \(the deployment's registry\) is Verde's "
                           r"JobRegistry with values no Verde constructor writes in its immutable game"):
            Verde.attach(chain, {**dep, "registry": address, "created": {**dep["created"], "registry": tx}})
    assert dep["game"] in reported  # one of them passes for genuine by its getter


def test_contracts_wired_to_others_are_refused(embedded_chain):
    chain, client = embedded_chain, embedded_chain.accounts[1]
    other = Verde.deploy(chain)
    # a registry of the other deployment's game (genuine, set up with the other registry)
    mine = _hostile(chain, client, registry_game=other.game.address, set_up=False)
    dep = {**mine, "game": other.game.address, "operators": other.operators.address,
           "created": {**other.created, "registry": mine["created"]["registry"]}}
    with pytest.raises(DeploymentError, match=rf"the DisputeGame at {other.game.address} is set up with the "
                       rf"JobRegistry at {other.registry.address}, not with the deployment's registry "
                       rf"{mine['registry']}"):
        Verde.attach(chain, dep)
    # a game never set up: its deployer may still wire it to another registry
    loose = _hostile(chain, client, set_up=False)
    with pytest.raises(DeploymentError, match=rf"the DisputeGame at {loose['game']} is not set up"):
        Verde.attach(chain, loose)
    # the deployment naming another (genuine) OperatorGame than its game's
    dep = _hostile(chain, client)
    with pytest.raises(DeploymentError, match=rf"set up with the OperatorGame at {dep['operators']}, not with the "
                       rf"deployment's operators {other.operators.address}"):
        Verde.attach(chain, {**dep, "operators": other.operators.address,
                             "created": {**dep["created"], "operators": other.created["operators"]}})
    # an OperatorGame of another game
    g, r = chain.create("DisputeGame", sender=client)
    stray, r2 = chain.create("OperatorGame", other.game.address, chain.deploy("Executor").address, sender=client)
    dep = _hostile(chain, client, game=(g.address, "0x" + bytes(r["transactionHash"]).hex()),
                   operators=(stray.address, "0x" + bytes(r2["transactionHash"]).hex()))
    with pytest.raises(DeploymentError, match=rf"the OperatorGame at {stray.address} answers to the game at "
                       rf"{other.game.address} \(its immutable `game`\), not to the deployment's DisputeGame {g.address}"):
        Verde.attach(chain, dep)
    # an OperatorGame whose executor is other code (Float32Harness), or a key
    harness = chain.deploy("Float32Harness").address
    for executor, says in ((harness, rf"the code at {harness} \(the executor of the OperatorGame at OPS\) is not "
                                     r"Verde's Executor: other code"),
                           (client.address, rf"no Executor at '{client.address}' on this chain \(the executor of the "
                                            r"OperatorGame at OPS has no code\)")):
        dep = _hostile(chain, client, executor=executor)
        with pytest.raises(DeploymentError, match=says.replace("OPS", dep["operators"])):
            Verde.attach(chain, dep)


def test_our_code_created_by_other_init_code_is_refused(embedded_chain):
    """The same runtime code, immutables and wiring, but created by init code of the client's,
    which wrote an `owed` balance for the client first: attached unchecked, the client
    withdraws an honest trainer's escrowed stake. Only the creating transaction shows it."""
    chain, client, honest = embedded_chain, embedded_chain.accounts[1], embedded_chain.accounts[2]
    dep = _hostile(chain, client, set_up=False)
    runtime = bytes(chain.w3.eth.get_code(dep["registry"]))  # ours, game = the deployment's
    owed_slot = int.from_bytes(keccak(bytes(12) + bytes.fromhex(client.address[2:]) + (3).to_bytes(32, "big")), "big")
    # what the constructor sets (slot 0 nextId = 1, slot 11 locked = 1), and more: totalOwed (2), owed[client]
    address, tx = _raw_create(chain, _returning(runtime, [(0, 1), (11, 1), (2, ETH), (owed_slot, ETH)]), client)
    g = chain.w3.eth.contract(address=dep["game"], abi=chain.artifacts["DisputeGame"].abi)
    chain.transact(g.functions.setUp(address, dep["operators"]), sender=client)
    dep = {**dep, "registry": address, "created": {**dep["created"], "registry": tx}}
    with pytest.raises(DeploymentError, match=rf"the JobRegistry at {address} was created by init code other than "
                       rf"Verde's constructor \(transaction {tx}\): its storage may hold anything"):
        Verde.attach(chain, dep)
    # what the check prevents: an honest trainer stakes, the client takes it out
    reg = chain.w3.eth.contract(address=address, abi=chain.artifacts["JobRegistry"].abi)
    assert chain.call(reg.functions.owed(client.address)) == ETH
    now = chain.now()
    terms = (*(bytes([i]) * 32 for i in range(1, 7)), 1, 1, 1, 2, 16, 3, ETH, now + 600, now + 1200, now + 1800, 3600)
    chain.transact(reg.functions.post(terms), sender=client, value=ETH // 10)
    chain.transact(reg.functions.join(1), sender=honest, value=ETH)
    chain.transact(reg.functions.withdraw(), sender=client)
    assert chain.w3.eth.get_balance(address) < chain.call(reg.functions.escrow())  # the stake is gone


def test_a_deployment_without_its_creating_transactions_or_with_a_late_from_block_is_refused(embedded_chain):
    chain = embedded_chain
    v = Verde.deploy(chain)
    dep = v.addresses()
    with pytest.raises(DeploymentError, match=r"(?s)does not name the transaction that created its JobRegistry.*"
                       r"Fix: re-deploy with this version's `verde deploy`"):
        Verde.attach(chain, {k: x for k, x in dep.items() if k != "created"})
    wrong = {**dep, "created": {**dep["created"], "registry": dep["created"]["game"]}}
    with pytest.raises(DeploymentError, match=rf"transaction {dep['created']['game']} did not create the JobRegistry"):
        Verde.attach(chain, wrong)
    with pytest.raises(DeploymentError, match=r"no transaction 0x1111.* on this chain"):
        Verde.attach(chain, {**dep, "created": {**dep["created"], "game": "0x" + "11" * 32}})
    late = chain.w3.eth.block_number + 1
    with pytest.raises(DeploymentError, match=rf"from_block {late} is after block \d+, where its contracts were "
                       r"created"):
        Verde.attach(chain, {**dep, "from_block": late})


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    from offchain.dispute.context import Context
    from offchain.protocol.jobfile import load
    path = write_small_job(tmp_path_factory.mktemp("job"))
    job = load(path)
    return path, job, Context(job)


def _post(chain, registry: str, job, ctx, client):
    """Post the job straight to `registry` (job 1) -> the registry contract."""
    reg = chain.w3.eth.contract(address=registry, abi=chain.artifacts["JobRegistry"].abi)
    now = chain.now()
    terms = (*commitments(job, ctx), 3, ETH, now + 600, now + 1200, now + 1800, 3600)
    chain.transact(reg.functions.post(terms), sender=client, value=ETH)
    return reg


def test_an_agent_refuses_a_registry_whose_game_is_the_clients_key_and_stakes_nothing(job, artifacts, tmp_path):
    """TrainerAgent given a Verde built on the client's deployment (not through attach): it
    checks before joining, ends (a refusal, not a retry) and has spent nothing."""
    _, job, ctx = job
    with connect("embedded", artifacts) as chain:
        client, me = chain.accounts[1], chain.accounts[2]
        dep = _hostile(chain, client, registry_game=client.address)
        reg = _post(chain, dep["registry"], job, ctx, client)
        v = Verde(chain, reg, *(chain.w3.eth.contract(address=dep[r], abi=chain.artifacts[c].abi)
                                for r, c in (("game", "DisputeGame"), ("operators", "OperatorGame"))),
                  created=dep["created"])
        before = chain.w3.eth.get_balance(me.address)
        with pytest.raises(DeploymentError, match=f"takes dispute decisions from {client.address}"):
            TrainerAgent(v, me, job, 1, tmp_path / "a", ctx=ctx).run(poll_s=0, max_s=60)
        assert not chain.call(reg.functions.seats(1, me.address))[0]
        assert chain.w3.eth.get_balance(me.address) == before


def test_verde_agent_refuses_the_clients_deployment_file(job, artifacts, tmp_path):
    """`verde agent` on a node the client deployed to: refused at attach, exit 2, no seat."""
    path, job, ctx = job
    with connect("embedded-node", artifacts) as chain:
        client, me = chain.accounts[1], chain.accounts[2]
        dep = _hostile(chain, client, registry_game=client.address)
        reg = _post(chain, dep["registry"], job, ctx, client)
        (tmp_path / "d.json").write_text(json.dumps(dep))
        before = chain.w3.eth.get_balance(me.address)
        env = {**os.environ, "VERDE_PRIVATE_KEY": me.key.hex(), "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
        r = subprocess.run([str(Path(sys.executable).parent / "verde"), "agent", str(path), "1", "--chain",
                            f"rpc:{chain._closer.url}", "--deployment", str(tmp_path / "d.json"), "--workdir",
                            str(tmp_path / "w"), "--device", "cpu"], capture_output=True, text=True, timeout=300,
                           env=env)
        out = " ".join((r.stdout + r.stderr).split())
        assert r.returncode == 2 and f"takes dispute decisions from {client.address}" in out and "Fix:" in out, out
        assert not chain.call(reg.functions.seats(1, me.address))[0]
        assert chain.w3.eth.get_balance(me.address) == before
