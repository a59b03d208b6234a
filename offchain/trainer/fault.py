"""A step that faults (docs/NUMERICS.md §14, docs/PROTOCOL.md §6): its trace up to the node that
faults, that node's decomposition up to the kernel that faults, and the fault claim they make.
A trainer builds it once per job, from a traced re-run of the step; its answers at levels 2-5
are the same as for any step, with ZERO where a run that faulted has nothing (nodes after the
faulting one, kernels after the faulting kernel)."""
from __future__ import annotations

import dataclasses
import functools

import repops

from ..dispute.oprun import OpRun
from ..protocol import merkle
from ..protocol.claims import fault_claim, fault_state


class FaultMismatch(RuntimeError):
    """The step raised a fault its decomposition does not have (a RepOps bug): no fault claim
    can be proven, so none is made."""


@dataclasses.dataclass
class FaultedStep:
    step: int
    nodes: list               # the trace's nodes, the last one the fault node
    outputs: list             # per node before it, its output tensors
    graph_nodes: int          # the job's nodes per step (the trace tree's leaf count)
    rule: str
    behaviour: object         # the trainer's (adversaries.Honest: the honest leaves)

    @classmethod
    def of(cls, step: int, recorder, chunk: int, graph_nodes: int, error: repops.Fault, behaviour) -> "FaultedStep":
        """recorder: the traced re-run of the step, which raised `error`."""
        node, inputs = recorder.faulted()
        run = OpRun(node.structure(), inputs, chunk)  # (it copies the inputs)
        run.kernels()
        found = behaviour.fault_where(run, run.fault)
        if found is None:
            raise FaultMismatch(f"step {step}, node {len(recorder.nodes)} ({node.op}) raised a fault ({error}) that its "
                                "decomposition does not have: a RepOps bug (report it with the job file); no fault "
                                "claim is made")
        k, e, rule = found
        nodes = list(recorder.nodes) + [dataclasses.replace(node, fault=(k, e))]
        return cls(step, nodes, list(recorder.outputs), graph_nodes, rule, behaviour)

    @property
    def node(self) -> int:
        return len(self.nodes) - 1

    @property
    def where(self) -> tuple[int, int]:
        """(kernel, element) where the fault node's decomposition faults."""
        return self.nodes[-1].fault

    @functools.cached_property
    def tree(self) -> merkle.Tree:
        """R^f: the nodes up to the faulting one, ZERO after it (a run that faulted has none)."""
        leaves = [n.leaf() for n in self.nodes]
        return merkle.Tree(tuple(self.behaviour.fault_leaves(leaves + [merkle.ZERO] * (self.graph_nodes - len(leaves)),
                                                             kernels=False)))

    @property
    def opened(self) -> tuple[bytes, bytes]:
        return fault_state(self.step), self.tree.root

    @property
    def claim(self) -> bytes:
        return fault_claim(self.step, self.tree.root)

    def fault_node(self) -> tuple[int, bytes, list[bytes]]:
        """(index, encoding, proof in R^f) of the fault node: what a party shows when its tree has
        ZERO where the other's has a node, or both traces are the same."""
        return self.node, self.nodes[-1].encode(), self.tree.proof(self.node)
