"""A disputing trainer as the referee sees it: every question has a deadline, and a party
that does not answer in time, answers malformed bytes, or fails a check loses."""
from __future__ import annotations

import concurrent.futures
from dataclasses import dataclass

from ..protocol.tensors import ElementProof


class Lost(Exception):
    """Raised inside a level when a party has lost: who, at which level, and why."""

    def __init__(self, party: "Party", level: int, reason: str):
        super().__init__(f"{party.name} loses at level {level}: {reason}")
        self.party, self.level, self.reason = party, level, reason


class Silence(Exception):
    """The endpoint did not answer (a transport timeout or a silent behaviour)."""


@dataclass
class Party:
    """endpoint: an object with the trainer's query methods (in process, or a transport
    stub such as offchain.dispute.transport.PipeEndpoint)."""
    name: str
    endpoint: object
    deadline_s: float = 60.0
    final: bytes = b""
    answered: int = 0
    bytes_received: int = 0
    reason: str = ""

    def __post_init__(self):
        # one worker per party for all its answers (a late answer leaves it busy: the party
        # has lost by then and is asked nothing more)
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"party-{self.name}")

    def ask(self, level: int, method: str, *args):
        try:
            result = self._pool.submit(getattr(self.endpoint, method), *args).result(timeout=self.deadline_s)
        except concurrent.futures.TimeoutError:
            raise Lost(self, level, f"no answer to {method}{args} within {self.deadline_s:g} s") from None
        except Silence:
            raise Lost(self, level, f"no answer to {method}{args}") from None
        except Exception as e:  # noqa: BLE001 - any failure to answer loses, whatever its cause
            raise Lost(self, level, f"could not answer {method}{args}: {type(e).__name__}: {e}") from None
        self.answered += 1
        self.bytes_received += _size(result)
        return result

    def element_proof(self, level: int, root: bytes, index: int, chunk: int, *where):
        """The proof `element(*where, index)` answers, checked against the commitment `root`,
        the index asked and the job's chunk size (a proof that chooses its own chunk size
        can verify with the same values laid out otherwise). Anything else loses."""
        proof = self.ask(level, "element", *where, index)
        try:
            ok = (isinstance(proof, ElementProof) and proof.chunk == chunk and proof.index == index
                  and proof.verify(root))
        except Exception:  # noqa: BLE001 - a malformed proof (a bad shape, code, sibling) loses, whatever breaks
            ok = False
        if not ok:
            raise Lost(self, level, f"its proof of element {index} of {where} does not verify against its "
                                    f"commitment (index {index}, chunk size {chunk})")
        return proof

    def hash32(self, level: int, value, what: str) -> bytes:
        if not isinstance(value, (bytes, bytearray)) or len(value) != 32:
            raise Lost(self, level, f"{what} is not a 32-byte hash")
        return bytes(value)


def _size(x) -> int:
    if isinstance(x, (bytes, bytearray)):
        return len(x)
    if isinstance(x, (list, tuple)):
        return sum(_size(v) for v in x)
    if hasattr(x, "nbytes"):
        return int(x.nbytes)
    if hasattr(x, "numel"):
        return int(x.numel() * x.element_size())
    return 8


class InProcess:
    """A trainer in this process, seen through its behaviour's answer hooks."""

    def __init__(self, trainer):
        self._t = trainer

    def __getattr__(self, method):
        fn = getattr(self._t, method)
        beh = self._t.behaviour

        def call(*args):
            if beh.silent(method):
                raise Silence(method)
            return beh.tamper(method, args, fn(*args))
        return call
