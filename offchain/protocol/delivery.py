"""Result delivery (docs/PROTOCOL.md §6): the accepted trainer publishes its final state
under its claim C_T in a content-addressed store (a directory: local, or shared, mounted,
synced), and the client takes it from there, checked against the claim the registry
accepted, tensor by tensor, chunk by chunk, before it writes one byte of model:

    <store>/<C_T hex>/state.safetensors   every state tensor, by name
    <store>/<C_T hex>/manifest.json       names in state order, each one's commitment, R_T

C_T = H(0x06 || S_T || R_T) and S_T is the Merkle root over the state commitments, so a
store entry that passes `verify` is the accepted result, whoever served it. The same
chain of hashes proves chunks on chain (`prove_chunk`, `prove_from_store`): the client's remedy against an
accepted trainer that does not deliver (JobRegistry.challenge / answer); `missing_chunks` says which
chunks a client lacks, hence which to challenge."""
from __future__ import annotations

import json
import os
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path

from .claims import step_claim
from .dataset import STATE_DICT, initial_state, state_tree, user_names
from .tensors import Committed, ElementProof, TensorError, canonical, chunk_count, commit

STATE, MANIFEST = "state.safetensors", "manifest.json"


class DeliveryError(ValueError):
    """A store entry that is missing, malformed, or not the accepted result."""


def publish(trainer, store: Path) -> Path:
    """Write the trainer's final state under its final claim (atomically: a reader sees a
    whole entry or none). -> the entry's directory."""
    from safetensors.torch import save_file
    T = trainer.steps
    claim = trainer.final_claim()
    S, R = trainer.open_claim(T)
    tensors = trainer.store.load(T)
    names = initial_state(trainer.job).names()  # state order (a safetensors file keeps its names sorted)
    entry = Path(store) / claim.hex()
    if entry.exists():
        return entry
    tmp = Path(store) / f".{claim.hex()}.tmp{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    save_file({n: tensors[n] for n in names}, str(tmp / STATE))
    leaves = [commit(tensors[n], trainer.chunk).hex() for n in names]
    (tmp / MANIFEST).write_text(json.dumps({"claim": claim.hex(), "state_root": S.hex(), "trace_root": R.hex(),
                                            "chunk": trainer.chunk, "names": names, "commitments": leaves}, indent=1))
    os.replace(tmp, entry)
    return entry


_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISLNK, "a symbolic link that does not resolve (a loop)"))


def _regular(store: Path, path: Path) -> str:
    """`path`'s real path, when it is a regular file inside `store` (symbolic links followed):
    checked without opening it, since a FIFO or a device blocks its reader or never ends, and
    a link out of the store serves what the store does not hold. FileNotFoundError (or
    NotADirectoryError) when there is none; DeliveryError naming what it is otherwise."""
    root, real = os.path.realpath(store), os.path.realpath(path)
    if os.path.commonpath([root, real]) != root:
        raise DeliveryError(f"{path} leads out of the store {root} (a symbolic link to {real}): refused unread")
    mode = os.lstat(real).st_mode
    if not stat.S_ISREG(mode):
        kind = next((what for test, what in _KINDS if test(mode)), f"of file type {stat.S_IFMT(mode):o}")
        raise DeliveryError(f"{path} is {kind}, not a regular file: refused unread")
    return real


def _read(store: Path, path: Path) -> bytes:
    """The bytes of `path`, a regular file of `store` (`_regular`); opened without following a
    link or waiting, and checked again once open (it may have been replaced since)."""
    fd = os.open(_regular(store, path), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise DeliveryError(f"{path} was replaced by something that is not a regular file: refused unread")
        return f.read()


def _entry(store: Path, claim: bytes) -> tuple[Path, dict]:
    """The store entry of `claim` and its manifest."""
    entry = Path(store) / claim.hex()
    try:
        manifest = json.loads(_read(store, entry / MANIFEST))
    except (FileNotFoundError, NotADirectoryError):
        raise DeliveryError(f"no result {claim.hex()[:16]}… in {store} (looked for {entry})") from None
    except DeliveryError:
        raise
    except (ValueError, OSError) as e:
        raise DeliveryError(f"the store entry {entry} is damaged: {e}") from None
    if not isinstance(manifest, dict):
        raise DeliveryError(f"the store entry {entry} is damaged: its {MANIFEST} is not an object")
    return entry, manifest


def verify(job, store: Path, claim: bytes) -> dict:
    """The accepted result from `store`, checked: every tensor's chunk tree against its
    commitment, the commitments against S_T, and H(S_T, R_T) against `claim`.
    -> {name: tensor}: exactly the committed tensors, in state order. An entry whose file
    holds a tensor more, less or under another name is refused: what is written is what was
    checked. DeliveryError naming what does not match."""
    from safetensors import SafetensorError
    from safetensors.torch import load
    entry, manifest = _entry(store, claim)
    names = initial_state(job).names()
    if manifest.get("names") != names:
        raise DeliveryError(f"{entry}: its tensors are not this job's state (names or order differ)")
    commitments = manifest.get("commitments")
    if manifest.get("chunk") != job.spec.chunk or not isinstance(commitments, list) or len(commitments) != len(names):
        raise DeliveryError(f"{entry}: its manifest is not for this job (chunk size or tensor count)")
    try:
        leaves = [bytes.fromhex(c) for c in commitments]
        S, R = state_tree(leaves).root, bytes.fromhex(manifest["trace_root"])
    except (KeyError, TypeError, ValueError) as e:
        raise DeliveryError(f"the store entry {entry} is damaged: its {MANIFEST} does not parse "
                            f"({type(e).__name__}: {e})") from None
    if step_claim(S, R) != claim:
        raise DeliveryError(f"{entry}: its commitments and trace root do not hash to the accepted claim "
                            f"{claim.hex()[:16]}…")
    try:
        tensors = load(_read(store, entry / STATE))
    except (FileNotFoundError, NotADirectoryError):
        raise DeliveryError(f"the store entry {entry} is damaged: it has no {STATE}") from None
    except DeliveryError:
        raise
    except (ValueError, SafetensorError, OSError) as e:
        raise DeliveryError(f"the store entry {entry} is damaged: {e}") from None
    missing, extra = [n for n in names if n not in tensors], sorted(set(tensors) - set(names))
    if missing or extra:
        raise DeliveryError(f"{entry}: its {STATE} does not hold exactly the committed tensors: missing {missing}, "
                            f"not committed {extra}")
    for n, leaf in zip(names, leaves):
        try:
            same = commit(tensors[n], job.spec.chunk) == leaf
        except TensorError as e:
            raise DeliveryError(f"{entry}: tensor {n} does not match its commitment ({e})") from None
        if not same:
            raise DeliveryError(f"{entry}: tensor {n} does not match its commitment (a chunk of it differs)")
    return {n: tensors[n] for n in names}


def model_tensors(job, state: dict) -> dict:
    """The model's parameters and buffers under the names its state_dict gives them (a
    buffer's state name without `buffer.`: TrainingState.model_names), without the
    optimizer's state; `state`: verify's. The names map one to one onto committed ones,
    checked, so no tensor can reach the model file under a name it was not checked under.
    A program job whose init records the client's names (dataset.user_names): exactly the
    client's state_dict, so model.load_state_dict(state, strict=True) fits the client's own
    module (folded buffers and the dropout step counter left out; an inference job's outputs
    under `outputs`)."""
    st = initial_state(job, "meta")
    extra, missing = sorted(set(state) - set(st.names())), [n for n in st.names() if n not in state]
    if extra or missing:
        raise DeliveryError(f"not this job's committed state: missing {missing}, not committed {extra}")
    out, source = {}, {}
    for n, m in st.model_names():
        if m in out:
            raise DeliveryError(f"state tensors {source[m]} and {n} would both be written as {m!r}")
        out[m], source[m] = state[n], n
    names = user_names(job)
    if names is None:
        return out
    unknown = sorted(set(names.values()) - set(out))
    if unknown:
        raise DeliveryError(f"init's {STATE_DICT!r} names tensors {unknown[:5]} that the model does not have")
    mine, used = {}, set()
    for k, n in names.items():  # a tied tensor under each of its keys, a copy each (safetensors shares nothing)
        mine[k] = out[n] if n not in used else out[n].clone()
        used.add(n)
    return mine


@dataclass(frozen=True)
class ChunkProof:
    """Consecutive chunks of one tensor of the accepted state with every hash that ties them to
    C_T (JobRegistry.Delivered): what answers a delivery challenge."""
    state_root: bytes
    trace_root: bytes
    commitment: bytes
    state_proof: tuple
    chunks: tuple  # ElementProof of each chunk, in order


def prove_chunk(leaves: list, value, chunk: int, trace_root: bytes, tensor: int, index: int, count: int = 1,
                budget: int | None = None) -> ChunkProof:
    """Chunks index .. index + count - 1 of state tensor `tensor` proven against
    C_T = H(0x06 || S_T || trace_root), S_T the root over `leaves` (the state commitments, state
    order); `value`: that tensor. budget: at most this many chunk bytes (at least one chunk), so
    an answer fits a transaction. A chunk index past the tensor's end gets its last chunk, which
    proves (by the shape it opens) that it and every later one do not exist."""
    if not 0 <= tensor < len(leaves):
        raise DeliveryError(f"no state tensor {tensor}: the state has {len(leaves)}")
    c = Committed(canonical(value), chunk)
    if c.root != leaves[tensor]:
        raise DeliveryError(f"state tensor {tensor} does not match its commitment")
    tree, n = state_tree(leaves), chunk_count(c.array.shape, chunk)
    indices = list(range(index, min(index + count, n))) or [n - 1]
    if budget is not None:
        indices = indices[:max(1, budget // (chunk * c.array.itemsize))]
    return ChunkProof(tree.root, trace_root, c.root, tuple(tree.proof(tensor)),
                      tuple(c.element_proof(i * chunk) for i in indices))


def _tensor(store: Path, claim: bytes, tensor: int):
    """(manifest, state tensor `tensor`) of a published entry, reading only that tensor."""
    from safetensors import safe_open
    entry, m = _entry(store, claim)
    if not 0 <= tensor < len(m["names"]):
        raise DeliveryError(f"no state tensor {tensor}: the state has {len(m['names'])}")
    with safe_open(_regular(store, entry / STATE), "pt") as f:
        return m, f.get_tensor(m["names"][tensor])


def prove_from_store(store: Path, claim: bytes, tensor: int, index: int, count: int = 1,
                     budget: int | None = None) -> ChunkProof:
    """`prove_chunk` from a published entry: its manifest's commitments and the one tensor read
    from its file (what an accepted agent answers a delivery challenge with)."""
    m, value = _tensor(store, claim, tensor)
    return prove_chunk([bytes.fromhex(c) for c in m["commitments"]], value, m["chunk"], bytes.fromhex(m["trace_root"]),
                       tensor, index, count, budget)


def missing_chunks(job, store: Path, claim: bytes) -> dict:
    """What a client lacks of the accepted result in `store`: {state tensor index: [chunk
    indices]} of every tensor that is absent or does not match its commitment (every chunk of
    it: a commitment does not say which chunk of a wrong tensor is wrong), all of them when the
    entry or its manifest is missing or is not the accepted result. Empty: the entry verifies."""
    from safetensors import SafetensorError, safe_open
    state = initial_state(job)
    names, shapes = state.names(), [tuple(t.shape) for t in state.tensors()]
    every = {i: list(range(chunk_count(shapes[i], job.spec.chunk))) for i in range(len(names))}
    try:
        entry, m = _entry(store, claim)
        leaves = [bytes.fromhex(x) for x in m["commitments"]]
        ok = (m.get("names") == names and m.get("chunk") == job.spec.chunk and len(leaves) == len(names)
              and step_claim(state_tree(leaves).root, bytes.fromhex(m["trace_root"])) == claim)
    except (DeliveryError, KeyError, ValueError, TypeError):
        return every
    if not ok:
        return every
    lacks = {}
    try:
        with safe_open(str(entry / STATE), "pt") as f:
            have = set(f.keys())
            for i, n in enumerate(names):
                if n not in have or commit(f.get_tensor(n), job.spec.chunk) != leaves[i]:
                    lacks[i] = every[i]
    except (ValueError, SafetensorError, OSError):  # an unreadable state file: all of it
        return every
    return lacks
