"""Trainer behaviours: the honest one and the dishonest ones every referee (off chain, on
chain, the agents) is tested against. A behaviour changes what a Trainer computes (hooks
in its steps) or what it answers (tamper), never the referee."""
from __future__ import annotations

import dataclasses

import numpy as np
import torch


class Honest:
    name = "honest"
    level = None  # where a referee must catch it (None: never disputes)

    # what it computes
    def spec(self, spec):
        return spec

    def batch(self, step, tensors):
        return tensors

    def skips(self, step) -> bool:
        return False

    def last_step(self, steps) -> int:
        return steps

    def before_record(self, step, index, func, args, kwargs, out):
        pass

    def loss(self, step, loss):
        """The loss the step differentiates (an honest trainer: the model's)."""
        return loss

    def faults(self):
        """What a fault in its steps does (an honest trainer: ends the run with a fault claim)."""
        import contextlib
        return contextlib.nullcontext()

    def fault_where(self, run, found):
        """(kernel, element, rule) its fault claim names, given its decomposition `run` of the
        node and the fault that decomposition found (honestly: that one; None: no claim)."""
        return found

    def fault_leaves(self, leaves: list, kernels: bool) -> list:
        """The leaves of its fault trace (kernels False) or of its faulting node's kernel tree."""
        return leaves

    def operator_kernels(self, run, kernels: list) -> list:
        """The kernels it commits for a node it decomposed (`run`, an OpRun)."""
        return kernels

    def after_record(self, step, index, func, args, kwargs, out):
        """May change `out` after it was recorded; returns the tensor it changed, if any."""
        return None

    @property
    def sees_ops(self) -> bool:
        """Whether it looks at each op of a step (before_record, after_record): if not, an
        untraced step runs without a hook, and a group op (the optimizer's) stays one op."""
        cls = type(self)
        return cls.before_record is not Honest.before_record or cls.after_record is not Honest.after_record

    def final_claim(self, trainer, claim):
        return claim

    # what it answers
    def tamper(self, method: str, args: tuple, result):
        return result

    def silent(self, method: str) -> bool:
        return False

    def state_leaves(self, point: int, leaves: list) -> list:
        return leaves

    def kernel_tamper(self, step: int, node: int, n_kernels: int):
        """A hook changing kernel outputs of the decomposed operator (levels 3-5), or None."""
        return None

    def kernel_tamper_after(self, step: int, node: int, n_kernels: int):
        """The same, applied after the kernel's output was committed."""
        return None

    def op_chunk(self, chunk: int) -> int:
        """The chunk size its levels 3-5 commitments use (the job's, honestly)."""
        return chunk

    # what its agent does on chain (offchain/agent): each of join's later moves, or not
    def acts(self, move: str) -> bool:
        """move: "commit", "reveal", "play" (its match moves), "settle", "open", "timeout"."""
        return True

    def garbles(self) -> bool:
        """Whether its agent first sends malformed moves (random calldata) in each phase."""
        return False


def _first(beh, step: int, index: int, match: bool) -> bool:
    """True at the first matching node of beh.step, in every run of that step (a cheater
    re-executing for the referee cheats the same way)."""
    if step != beh.step:
        return False
    if getattr(beh, "_node", None) is None and match:
        beh._node = index
    return index == getattr(beh, "_node", None)


def _raw(t: torch.Tensor) -> torch.Tensor:
    """The tensor's memory, on its device, under a version counter of its own (`.data`, not
    `.detach()`): a cheater's writes there bypass autograd's (an honest-looking in-place op
    would make backward refuse a saved tensor)."""
    return t.data


def _host_copies(args) -> list:
    """Fresh CPU copies of the tensors among args: the reference decomposition's operands
    (it runs on the host, whatever device trained)."""
    return [a.detach().cpu().clone() if isinstance(a, torch.Tensor) else a for a in args]


def _nudge(x: np.float32, ulps: int) -> np.float32:
    """x moved `ulps` ulps toward +inf."""
    for _ in range(ulps):
        x = np.nextafter(x, np.float32(np.inf))
    return x


def _flip(t: torch.Tensor, element: int = 0, ulps: int = 1):
    """Change one float32 element by `ulps` ulps (an integer one by `ulps`), in place."""
    a = _raw(t)
    idx = tuple(int(i) for i in np.unravel_index(element, t.shape))
    if t.is_floating_point():  # (the nudge in the tensor's own dtype, on the host: one element)
        a[idx] = float(_nudge(a[idx].cpu().numpy()[()], ulps))
    else:
        a[idx] += ulps


@dataclasses.dataclass
class Lazy(Honest):
    """Skips the optimizer updates from step `start` on (saves the work, claims anyway)."""
    start: int = 1
    name = "lazy"
    level = 2

    def skips(self, step):
        return step >= self.start


@dataclasses.dataclass
class StopsEarly(Honest):
    """Trains only `steps_done` steps and posts a made-up final claim."""
    steps_done: int = 1
    name = "stops-early"
    level = 2  # its answers are honest re-executions until it must open its made-up claim

    def last_step(self, steps):
        return min(steps, self.steps_done)

    def final_claim(self, trainer, claim):
        return claim if claim is not None else bytes.fromhex("ee" * 32)


@dataclasses.dataclass
class PoisonedData(Honest):
    """Trains step `step` on a batch with one input value changed."""
    step: int = 1
    name = "poisoned-data"
    level = 2

    def batch(self, step, tensors):
        if step != self.step:
            return tensors
        first = tensors[0].clone()
        if first.is_floating_point():
            first.view(-1)[0] += 1.0
        else:
            first.view(-1)[0] = (first.view(-1)[0] + 1) % max(2, int(first.max()) + 1)
        return (first,) + tuple(tensors[1:])


@dataclasses.dataclass
class WrongHyperParameter(Honest):
    """Trains with another learning rate (attributes of its AdamW ops differ)."""
    lr_factor: float = 2.0
    name = "wrong-hyper-parameter"
    level = 2

    def spec(self, spec):
        if spec.optimizer is None:
            raise ValueError(f"{self.name}: an inference job has no optimizer to train with other hyper-parameters")
        opt = spec.optimizer.model_copy(update={"lr": spec.optimizer.lr * self.lr_factor})
        return spec.model_copy(update={"optimizer": opt})


@dataclasses.dataclass
class CorruptValue(Honest):
    """One output element of node `node` at step `step` is off by `ulps` ulps (one: a change
    later roundings may absorb; more: one that reaches the result), and its decomposition
    agrees (the last primitive kernel produced it): a wrong primitive result, caught by
    executing that one primitive (level 5)."""
    step: int = 1
    node: int = 9
    element: int = 0
    ulps: int = 1
    name = "corrupt-value"
    level = 5

    def before_record(self, step, index, func, args, kwargs, out):
        if (step, index) == (self.step, self.node):
            outs = [o for o in (out if isinstance(out, (list, tuple)) else [out]) if isinstance(o, torch.Tensor)]
            if not outs:  # an in-place op that returns nothing: the tensor its last kernel writes
                from ..protocol.trace import _mutated
                outs = _mutated(func, args, kwargs)[-1:]
            t = outs[0]
            if t.dtype != torch.bool and t.numel() > self.element:
                _flip(t, self.element, self.ulps)

    def kernel_tamper(self, step, node, n_kernels):
        if (step, node) != (self.step, self.node):
            return None

        def tamper(k, out):  # the last real kernel's output is the op's output
            if k == n_kernels - 2 and out.dtype.kind == "f":
                out.reshape(-1)[self.element] = _nudge(out.reshape(-1)[self.element], self.ulps)
        return tamper


NATIVE_TARGETS = ("aten.gelu.default", "aten.silu.default", "aten._softmax.default", "aten._log_softmax.default")


@dataclasses.dataclass
class KernelCheat(Honest):
    """Computes the first `op` of step `step` through the reference decomposition with one
    element of one kernel's output changed (an integer's by 1), a mask's flipped (kernel `from_end` counted from the last;
    `after_commit`: changed after that kernel's output was committed, so the next kernel
    reads another value than its source holds). Consistent at every level, as a careful
    cheater would be: caught at level 5 (wrong primitive) or 4 (wrong operand)."""
    step: int = 1
    op: str = "aten._log_softmax.default"
    from_end: int = 1
    element: int = 0
    after_commit: bool = False
    kernel: int = -1  # >= 0: this kernel (counted from the first) instead of from_end
    ulps: int = 1     # how far the element moves (one ulp can be absorbed by a later sum)
    name = "kernel-cheat"

    @property
    def level(self):
        return 4 if self.after_commit else 5

    def _hook(self, n_kernels):
        target = self.kernel if self.kernel >= 0 else n_kernels - 1 - self.from_end  # n_kernels counts "result"

        def tamper(k, out):
            if k == target and out.dtype == np.bool_ and out.size:  # a mask (philox): one element flipped
                flat = out.reshape(-1)
                flat[self.element % out.size] = not flat[self.element % out.size]
            if k == target and out.dtype.kind == "i" and out.size:  # an integer kernel: one element + 1
                out.reshape(-1)[self.element % out.size] += 1
            if k == target and out.dtype.kind == "f" and out.size:
                flat = out.reshape(-1)
                nonzero = np.flatnonzero(flat[self.element % out.size:] != 0)  # a zero's change is absorbed
                i = self.element % out.size + (int(nonzero[0]) if nonzero.size else 0)
                if flat[i] == flat[i]:
                    flat[i:i + 1].view(np.uint32)[0] += np.uint32(self.ulps)  # away from zero
                else:
                    flat[i] = np.float32(1.0)
        return tamper

    def before_record(self, step, index, func, args, kwargs, out):
        if not _first(self, step, index, str(func) == self.op):
            return
        import repops
        from repops.reference.prims import observe
        count = []
        with observe(lambda name, a, o: count.append(name)), repops.deterministic("reference"):
            func(*_host_copies(args), **kwargs)
        hook = self._hook(len(count) + 1)
        counter = [0]

        def on_kernel(name, a, o):
            hook(counter[0], o)
            counter[0] += 1
        with observe(on_kernel), repops.deterministic("reference"):
            res = func(*_host_copies(args), **kwargs)
        tensors = (lambda r: [r] if isinstance(r, torch.Tensor) else [t for t in r if isinstance(t, torch.Tensor)])  # noqa: E731
        for mine, theirs in zip(tensors(out), tensors(res)):  # every output (dropout's mask too)
            _raw(mine).copy_(theirs.detach())

    def kernel_tamper(self, step, node, n_kernels):
        return self._hook(n_kernels) if (step, node) == (self.step, getattr(self, "_node", None)) and not self.after_commit else None

    def kernel_tamper_after(self, step, node, n_kernels):
        return self._hook(n_kernels) if (step, node) == (self.step, getattr(self, "_node", None)) and self.after_commit else None


@dataclasses.dataclass
class NativeKernel(Honest):
    """Computes one transcendental op of step `step` with native torch (libm/MKL) instead
    of RepOps: a non-reproducible kernel. Its outputs cannot come out of the spec's
    decomposition, so it is caught at level 3."""
    step: int = 1
    name = "native-kernel"
    level = 3

    def before_record(self, step, index, func, args, kwargs, out):
        if _first(self, step, index, str(func) in NATIVE_TARGETS and isinstance(out, torch.Tensor)):
            with torch.no_grad():
                native = func(*args, **kwargs)  # inside the hook the RepOps mode is off: native
            _raw(out).copy_(native.detach())


@dataclasses.dataclass
class TamperedInput(Honest):
    """Changes the output of the first `op` of step `step` after it was recorded, so the
    ops that read it see another value than the one committed (wrong data wiring): Case 2."""
    step: int = 1
    op: str = "aten.addmm.default"
    element: int = 0
    name = "tampered-input"
    level = 2

    def after_record(self, step, index, func, args, kwargs, out):
        if _first(self, step, index, str(func) == self.op and isinstance(out, torch.Tensor)):
            a = _raw(out)
            a[tuple(int(i) for i in np.unravel_index(self.element % out.numel(), out.shape))] += 1.0
            return out


@dataclasses.dataclass
class ExtraOp(Honest):
    """Scales its loss by 1 at step `step`: the same values, but a graph that is not the
    job's (one more node): Case 1."""
    step: int = 1
    name = "wrong-graph"
    level = 2

    def loss(self, step, loss):
        return loss * 1.0 if step == self.step else loss


@dataclasses.dataclass
class InconsistentOpening(CorruptValue):
    """Opens its step claim with roots that do not hash to it (levels inconsistent)."""
    name = "inconsistent-levels"
    level = 2

    def tamper(self, method, args, result):
        if method == "open_claim" and args[0] > 0:
            return result[0], bytes(32)
        return result


@dataclasses.dataclass
class BadMerkleProof(CorruptValue):
    """Computes a wrong value (as CorruptValue) and, disputed, corrupts the Merkle proof of
    every node it reveals."""
    name = "bad-merkle-proof"
    level = 2

    def tamper(self, method, args, result):
        if method == "node":
            enc, proof = result
            return enc, [bytes(32)] * len(proof) if proof else [b"\x01" * 32]
        return result


@dataclasses.dataclass
class ForgedCheckpoint(Honest):
    """Posts a state whose tensor `tensor` differs from what its trace produced (a forged
    checkpoint tensor), with a trace that is honest."""
    tensor: int = 0
    step: int = 1
    name = "forged-checkpoint"
    level = 2

    def state_leaves(self, point, leaves):
        if point > self.step:
            leaves = list(leaves)
            leaves[self.tensor] = bytes(31) + b"\x01"
        return leaves


@dataclasses.dataclass
class LyingDecomposition(CorruptValue):
    """Computes a wrong value and, disputed, claims its operator decomposes into another
    number of kernels: the referee's own decomposition (structure only) decides: level 3."""
    name = "lying-decomposition"
    level = 3

    def tamper(self, method, args, result):
        return result + 1 if method == "kernel_count" else result


@dataclasses.dataclass
class InPlaceResultLiar(Honest):
    """One ulp off in the output of the first in-place `op` of step `step`, with every
    kernel of its decomposition honestly committed: the lie is only in the op's result (the
    mutated tensor), whose source is the decomposition's final copy kernel. (Before that
    kernel existed, the result was described as the pre-op input and the honest party lost.)"""
    step: int = 1
    op: str = "repops.adamw_.default"
    element: int = 0
    name = "inplace-result-liar"
    level = 4

    def before_record(self, step, index, func, args, kwargs, out):
        if _first(self, step, index, str(func) == self.op):
            from ..protocol.trace import _mutated
            _flip(out if isinstance(out, torch.Tensor) else _mutated(func, args, kwargs)[-1], self.element)

    def kernel_tamper_after(self, step, node, n_kernels):
        if (step, node) != (self.step, getattr(self, "_node", None)):
            return None

        def tamper(k, out):  # the final copy: its committed output was honest
            if k == n_kernels - 2:
                flat = out.reshape(-1)
                flat[self.element] = np.nextafter(flat[self.element], np.float32(np.inf))
        return tamper


@dataclasses.dataclass
class Silent(CorruptValue):
    """Computes a wrong value, then stops answering after `answers` queries (offline)."""
    answers: int = 2
    name = "silent"
    level = 1

    def __post_init__(self):
        self._n = 0

    def silent(self, method):
        self._n += 1
        return self._n > self.answers


@dataclasses.dataclass
class Copier(Honest):
    """Posts the final claim of another trainer without training (cannot answer)."""
    claim: bytes = b""
    name = "copier"
    level = 1

    def last_step(self, steps):
        return 0

    def final_claim(self, trainer, claim):
        return self.claim

    def silent(self, method):
        return True  # it has nothing to answer with


@dataclasses.dataclass
class ReChunked(CorruptValue):
    """A wrong value, and its levels 3-5 tensors committed under another chunk size with the
    same chunk count: its element proofs verify by their own chunk size. The referee must
    hold a proof to the job's (an off-chain referee that did not, crashed at level 4)."""
    extra: int = 1
    name = "re-chunked"
    level = 4

    def op_chunk(self, chunk):
        return chunk + self.extra


# -- what an agent does on chain: the chain's own attacks (tests/test_agent_security.py) ------
@dataclasses.dataclass
class NeverCommits(CorruptValue):
    """Joins (stakes), then never commits: the stake must go to the pot, never stall the job."""
    name = "never-commits"
    level = 0
    withheld = "commit"

    def acts(self, move):
        return move != self.withheld


@dataclasses.dataclass
class NeverReveals(NeverCommits):
    """Commits a sealed result, never reveals it."""
    name = "never-reveals"
    withheld = "reveal"


@dataclasses.dataclass
class Sacrifice(Honest):
    """Trains honestly (the right claim), then loses its matches on time and opens nothing:
    a sybil throwing the correct claim, hoping the honest trainer that shares it falls too."""
    name = "sacrifice"
    level = 1

    def acts(self, move):
        return move not in ("play", "open", "timeout", "settle")


@dataclasses.dataclass
class Withholder(Honest):
    """Trains honestly and is accepted, then never delivers: it publishes nothing and leaves
    the client's delivery challenges unanswered (the client's remedy takes its held pay)."""
    name = "withholder"
    level = 0

    def acts(self, move):
        return move not in ("publish", "deliver")


@dataclasses.dataclass
class Colluder(CorruptValue):
    """A wrong claim, and silence on chain after the reveal: asked to play a fellow
    colluder, it never opens, moves or claims a timeout (the stall of issue #18)."""
    name = "colluder"
    level = 1

    def acts(self, move):
        return move in ("commit", "reveal")


@dataclasses.dataclass
class Garbler(CorruptValue):
    """Sends malformed moves (random calldata for each of the phase's functions) before its
    real ones: every one must revert and change nothing."""
    name = "garbler"
    level = 5

    def garbles(self):
        return True


class FaultIgnorer(Honest):
    """Trains through a step that faults (an index out of range reads the gather's fill, x / 0 is
    0: what the kernels compute when a fault is not raised) and claims the result: a result
    claim against a fault claim, decided at level 5 by the fault rule in one step."""
    name = "fault-ignorer"
    level = 5

    def faults(self):
        from repops.faults import noted
        return noted(lambda rule, element: None)


@dataclasses.dataclass
class FalseFault(Honest):
    """Claims that step `step` faults at its first `op` node (its first fault kernel, element
    0, or `element`) where nothing faults: the referee checks the rule at that element and finds
    it false (an element past the kernel's output is none: no fault there either)."""
    step: int = 1
    op: str = "aten.nll_loss_forward.default"
    element: int = 0
    name = "false-fault"
    level = 5

    def before_record(self, step, index, func, args, kwargs, out):
        if step == self.step and str(func) == self.op:
            from repops.errors import IndexFault
            raise IndexFault(f"made up by {self.name}", "index", 0)

    def fault_where(self, run, found):
        from offchain.dispute.oprun import FAULT_KERNEL
        return found or (next(i for i, k in enumerate(run.kernels()) if k.name == FAULT_KERNEL), self.element, "index")


@dataclasses.dataclass
class FaultStepLiar(Honest):
    """Computes the fault honestly but claims it at a later step (`later` steps on: paid for
    more steps), with the honest trace: the same trace as the honest fault claim, another state
    root; the honest party shows its fault node and the liar loses at level 2."""
    later: int = 1
    name = "fault-step-liar"
    level = 2

    def _lie(self, trainer):
        from offchain.protocol.claims import fault_state
        f = trainer.faulted()
        return fault_state(f.step + self.later), f.tree.root

    def tamper(self, method, args, result):
        t = getattr(self, "_trainer", None)
        if t is None or t.fault_step is None:
            return result
        from offchain.protocol.claims import step_claim
        if method == "open_claim" and args[0] > t.fault_step:
            return self._lie(t)
        if method == "claim_at":
            lie = step_claim(*self._lie(t))
            return [lie if p > t.fault_step else c for p, c in zip(args[0], result)]
        return result

    def final_claim(self, trainer, claim):
        self._trainer = trainer
        if trainer.fault_step is None:
            return claim
        from offchain.protocol.claims import step_claim
        return step_claim(*self._lie(trainer))


class FaultTrailer(Honest):
    """Agrees with the honest fault trace up to its fault node, then puts a node where a run
    that faulted has none (ZERO): the honest party shows its fault node (before the first
    difference) and the trailer loses at level 2."""
    name = "fault-trailer"
    level = 2

    def silent(self, method):
        return method == "node"  # (it has no node for the leaf it made up)

    def fault_leaves(self, leaves, kernels):
        if kernels:
            return leaves
        i = max(i for i, leaf in enumerate(leaves) if leaf != bytes(32))  # the fault node's leaf
        return leaves[:i + 1] + [b"\x5a" * 32] + leaves[i + 2:] if i + 1 < len(leaves) else leaves


class FaultKernelCopier(FaultIgnorer):
    """Trains through the fault (a result claim) and commits, in the faulting node's kernel tree,
    the honest faulting kernel (output FAULT(e)) followed by the kernels that compute on: the
    first difference is after the fault kernel, where the honest tree has ZERO; the honest
    party shows its faulting kernel and the copier loses at level 3."""
    name = "fault-kernel-copier"
    level = 3

    def operator_kernels(self, run, kernels):
        if run.fault is None:
            return kernels
        from offchain.dispute.oprun import fault_output
        k, e, _ = run.fault
        return kernels[:k] + [dataclasses.replace(kernels[k], output=fault_output(e))] + kernels[k + 1:]


BEHAVIOURS = {cls.name: cls for cls in (Honest, Lazy, StopsEarly, PoisonedData, WrongHyperParameter, CorruptValue, KernelCheat,
                                        NativeKernel, TamperedInput, ExtraOp, InconsistentOpening, BadMerkleProof,
                                        ForgedCheckpoint, LyingDecomposition, Silent, Copier, InPlaceResultLiar,
                                        ReChunked, NeverCommits, NeverReveals, Sacrifice, Withholder, Colluder, Garbler,
                                        FaultIgnorer, FalseFault, FaultStepLiar, FaultTrailer, FaultKernelCopier)}


def from_spec(spec: str) -> Honest:
    """'corrupt-value:step=2,node=9' -> CorruptValue(step=2, node=9) (CLI and agents).
    Values are ints, or hex bytes written 0x..."""
    name, _, params = spec.partition(":")
    if name not in BEHAVIOURS:
        raise ValueError(f"unknown behaviour {name!r}; known: {', '.join(sorted(BEHAVIOURS))}")
    kwargs = {}
    for item in filter(None, params.split(",")):
        key, _, val = item.partition("=")
        if not val:
            raise ValueError(f"behaviour parameter {item!r} is not key=value")
        val = val.strip()
        if val.startswith("0x"):
            kwargs[key.strip()] = bytes.fromhex(val[2:])
        else:
            try:
                kwargs[key.strip()] = int(val)
            except ValueError:
                try:
                    kwargs[key.strip()] = float(val)
                except ValueError:
                    kwargs[key.strip()] = val
    try:
        return BEHAVIOURS[name](**kwargs)
    except TypeError as e:
        raise ValueError(f"behaviour {name!r}: {e}") from None


def summary() -> list[str]:
    """One line per behaviour: its spec with every parameter's default, and what it does
    (`verde agent --behaviour help`)."""
    out = []
    for name, cls in sorted(BEHAVIOURS.items()):
        params = ",".join(f"{f.name}={_spec_value(f.default)}" for f in dataclasses.fields(cls)) \
            if dataclasses.is_dataclass(cls) else ""
        doc = " ".join((cls.__doc__ or "").split())
        first = doc.split(". ")[0].rstrip(".") if doc else "trains and answers honestly"
        if len(first) > 100:
            first = first[:first.rfind(" ", 0, 100)].rstrip(",;:") + " …"
        out.append(f"{name + (':' + params if params else '')}  {first}")
    return out


def _spec_value(v) -> str:
    return "0x" + v.hex() if isinstance(v, bytes) else str(int(v) if isinstance(v, bool) else v)


STEP_FIELDS = ("step", "start", "steps_done")  # a step index of the job: 0 .. steps - 1


def check_target(beh: Honest, steps: int, ops: list[str]) -> None:
    """Refuse a cheat aimed at what the job does not have: a step past the job's last, a node
    a step does not have, an op no node of a step runs. It would do nothing at all (an honest
    run under another name), so a test or a demo built on it would test nothing.
    ops: the op of each node of a step's graph, in order (Context.graph)."""
    for f in STEP_FIELDS:
        v = getattr(beh, f, None)
        if isinstance(v, int) and not 0 <= v < steps:
            raise ValueError(f"{f}={v} is not a step of this job (it has steps 0 to {steps - 1}): the behaviour would "
                             "never act")
    node = getattr(beh, "node", None)
    if isinstance(node, int) and not 0 <= node < len(ops):
        raise ValueError(f"node={node} is not a node of a step (a step has {len(ops)} nodes, 0 to {len(ops) - 1}): "
                         "the behaviour would never act")
    op = getattr(beh, "op", None)
    if isinstance(op, str) and op not in ops:
        have = sorted(set(ops))
        raise ValueError(f"op={op!r} is not run by any node of a step; its ops: {', '.join(have[:12])}"
                         + (" …" if len(have) > 12 else ""))
