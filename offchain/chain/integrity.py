"""Is a deployment Verde's? A trainer stakes in whatever JobRegistry a deployment file names,
and the file may be the client's own: a registry whose `game` is the client's key, or a
DisputeGame, OperatorGame or Executor of other code, would let the client call `decide`
against an honest trainer and take its stake. `check_deployment` runs before anything is
staked (Verde.attach, so every agent start and CLI call that attaches) and refuses, with
DeploymentError, unless:

1. the runtime code at the registry, the game, the operators and the OperatorGame's
   executor is byte for byte the runtime code of our compiled artifacts, except the
   immutables' slots (solc's `immutableReferences`), and every slot of one immutable holds
   the same value, of its type's width. The second half matters: a contract created by other
   init code can carry our runtime code with, say, the real game's address in the slot that
   `game()` returns and the client's key in the slot `decide` checks its caller against; our
   constructor writes one value into every slot of an immutable, so its values are then
   exactly what the public getters report.
2. the immutables and the storage wire the four together: JobRegistry.game is the
   deployment's game; the game is set up (DisputeGame.setUp, once, by its deployer) with the
   deployment's registry and operators; OperatorGame.game is the deployment's game and its
   executor holds our Executor's code. The other immutables (JobRegistry's floors and delivery
   terms, DisputeGame's deployer, which can do nothing once setUp has run) may be anything:
   the agent's policy judges the terms.
3. the registry, the game and the operators were created by top-level transactions whose
   init code is our artifact's creation bytecode followed by its constructor arguments
   (the deployment file's `created`: their hashes, which `verde deploy` writes). The same
   runtime code is not enough: init code may write any storage before it returns our
   runtime code (an `owed` balance for the client that drains the escrowed stakes, a seat
   in a future job, a match under way), and storage cannot be listed over JSON-RPC. Our
   constructor writes none of that, and afterwards only our code writes it. The Executor
   has no storage, so its code alone is checked (it is not in the deployment file).
4. `from_block` is no later than the block that created any of them (an agent scans events
   from there: a later one would hide moves it must answer).

The metadata hash that solc appends to the runtime code (CBOR: an IPFS hash of the metadata,
which holds every source file's hash and the settings) is compared, not masked: the same
pinned solc, settings and sources give the same bytes, so comparing it costs nothing and
pins the exact contract sources the agent itself runs against. Masking it would admit only
code built from source text that differs in comments or formatting: nothing an agent needs,
and it would need the CBOR length parsed out of untrusted code. A deployment from another
Verde version's sources is refused; when only the metadata differs, the message says so.

Cost: four eth_getCode, two eth_call, three transactions with their receipts.
"""
from __future__ import annotations

from web3 import Web3
from web3.exceptions import TransactionNotFound

from .errors import DeploymentError

FIX = ("use a deployment you made yourself (`verde deploy --out FILE`, then give FILE to your clients) or a "
       "deployment file from a source you trust")
ROLES = (("registry", "JobRegistry"), ("game", "DisputeGame"), ("operators", "OperatorGame"))
CONSTRUCTOR_WORDS = {"JobRegistry": 7, "DisputeGame": 0, "OperatorGame": 2}  # ABI words of constructor arguments
ZERO = "0x" + "00" * 20


def check_deployment(chain, deployment: dict) -> None:
    """Raise DeploymentError unless `deployment` ({registry, game, operators, created,
    from_block}) names Verde's contracts, wired to each other, on `chain` (the module's
    docstring says what is checked and why)."""
    addr = {role: _address(deployment.get(role), role, contract) for role, contract in ROLES}
    registry, game, operators = addr["registry"], addr["game"], addr["operators"]

    reg = runtime_immutables(chain, "JobRegistry", registry, "the deployment's registry")
    if _hex(reg["game"]) != game:
        other = _hex(reg["game"])
        what = ("an account with no code (a key: its holder" if not _code(chain, other) else
                "not the DisputeGame checked here (it")
        raise DeploymentError(
            f"the JobRegistry at {registry} takes dispute decisions from {other} (its immutable `game`), not from the "
            f"deployment's DisputeGame {game}: {other} is {what} could call decide() against an honest trainer and "
            "take its stake)", FIX)

    runtime_immutables(chain, "DisputeGame", game, "the deployment's game")
    abi = chain.artifacts["DisputeGame"].abi
    g = chain.w3.eth.contract(address=game, abi=abi).functions
    wired = {"registry": chain.call(g.registry()), "operators": chain.call(g.operators())}
    if wired["registry"] == ZERO:
        raise DeploymentError(f"the DisputeGame at {game} is not set up (setUp was never called): its deployer can "
                              "still wire it to another registry", FIX)
    for role in ("registry", "operators"):
        if Web3.to_checksum_address(wired[role]) != addr[role]:
            raise DeploymentError(
                f"the DisputeGame at {game} is set up with the {dict(ROLES)[role]} at {wired[role]}, not with the "
                f"deployment's {role} {addr[role]}: the deployment's contracts are not wired to each other", FIX)

    op = runtime_immutables(chain, "OperatorGame", operators, "the deployment's operators")
    if _hex(op["game"]) != game:
        raise DeploymentError(
            f"the OperatorGame at {operators} answers to the game at {_hex(op['game'])} (its immutable `game`), not "
            f"to the deployment's DisputeGame {game}", FIX)
    runtime_immutables(chain, "Executor", _hex(op["executor"]), f"the executor of the OperatorGame at {operators}")

    created = deployment.get("created") or {}
    first = min(_creation_block(chain, contract, addr[role], created.get(role)) for role, contract in ROLES)
    from_block = int(deployment.get("from_block", 0))
    if from_block > first:
        raise DeploymentError(
            f"the deployment's from_block {from_block} is after block {first}, where its contracts were created: an "
            "agent scans the contracts' events from from_block and would miss some", FIX)


def runtime_immutables(chain, name: str, address: str, role: str) -> dict[str, int]:
    """The immutables of the `name` contract at `address` ({name: value}), once its runtime
    code is checked to be our artifact's: the same bytes outside the immutables' slots, and
    one value of its type's width in every slot of each immutable. DeploymentError
    otherwise, naming `role` (what the address is in the deployment)."""
    art = chain.artifacts[name]
    code = _code(chain, address)
    if not code:
        raise DeploymentError(f"no {name} at {address!r} on this chain ({role} has no code)",
                              "run `verde deploy` against this node (a restarted Anvil forgets its state), or " + FIX)
    ours = art.deployed_bytecode
    masked, values, mixed = bytearray(code), {}, []
    if len(code) == len(ours):
        for imm, typ, places in art.immutables:
            words = {code[s:s + n] for s, n in places}
            for s, n in places:
                masked[s:s + n] = bytes(n)
            value = int.from_bytes(next(iter(words)), "big")
            if len(words) != 1 or value >> _width(typ):
                mixed.append(imm)
            values[imm] = value
    if bytes(masked) != ours:
        meta = int.from_bytes(ours[-2:], "big") + 2
        if len(code) == len(ours) and masked[:-meta] == ours[:-meta]:
            detail = ("the same instructions as ours, compiled from other source text (its metadata hash differs): "
                      "another Verde version's contracts")
        else:
            at = next((i for i, (a, b) in enumerate(zip(masked, ours)) if a != b), min(len(code), len(ours)))
            detail = f"other code ({len(code)} bytes, ours {len(ours)}; the first difference at byte {at})"
        raise DeploymentError(f"the code at {address} ({role}) is not Verde's {name}: {detail}", FIX)
    if mixed:
        raise DeploymentError(
            f"the code at {address} ({role}) is Verde's {name} with values no Verde constructor writes in its immutable "
            f"{', '.join(mixed)} (different values in the places that read it, or more than its type holds): it was "
            "made to report one thing and do another", FIX)
    return values


def _creation_block(chain, name: str, address: str, tx_hash) -> int:
    """The block of the transaction that created `address`, checked to be a top-level
    creation from our artifact's init code (so its storage is what our constructor wrote)."""
    if not tx_hash:
        raise DeploymentError(
            f"the deployment file does not name the transaction that created its {name} at {address} (`created`): "
            "without it, its storage cannot be shown to be what Verde's constructor wrote",
            "re-deploy with this version's `verde deploy` (it records them), or " + FIX)
    try:
        tx, receipt = chain._guard("reading the deployment's transactions", lambda: (
            chain.w3.eth.get_transaction(tx_hash), chain.w3.eth.get_transaction_receipt(tx_hash)))
    except (TransactionNotFound, ValueError, TypeError):
        raise DeploymentError(f"no transaction {tx_hash} on this chain (the deployment file says it created the {name} "
                              f"at {address})", FIX) from None
    art = chain.artifacts[name]
    data = bytes(tx["input"])
    made = receipt.get("contractAddress")
    if tx.get("to") is not None or receipt["status"] != 1 or not made or Web3.to_checksum_address(made) != address:
        raise DeploymentError(f"transaction {tx_hash} did not create the {name} at {address}", FIX)
    if not data.startswith(art.bytecode) or len(data) != len(art.bytecode) + 32 * CONSTRUCTOR_WORDS[name]:
        raise DeploymentError(
            f"the {name} at {address} was created by init code other than Verde's constructor (transaction {tx_hash}): "
            "its storage may hold anything (a balance owed to the client, a seat in a job, a match under way)", FIX)
    return int(receipt["blockNumber"])


def _address(value, role: str, contract: str) -> str:
    if not isinstance(value, str) or not Web3.is_address(value):
        raise DeploymentError(f"the deployment's {role} is {value!r}, not the address of a {contract}",
                              "pass a deployment file written by `verde deploy`")
    return Web3.to_checksum_address(value)


def _code(chain, address: str) -> bytes:
    return bytes(chain._guard("eth_getCode", lambda: chain.w3.eth.get_code(address)))


def _hex(value: int) -> str:
    return Web3.to_checksum_address(value.to_bytes(20, "big"))


def _width(typ: str) -> int:
    """Bits a value of Solidity type `typ` holds (solc writes it right-aligned in its word)."""
    if typ.startswith(("address", "contract ")):
        return 160
    if typ.startswith("uint"):
        return int(typ[4:] or 256)
    if typ == "bool":
        return 1
    return 256
