"""What the referee knows without any trainer: from the job alone it computes the agreed
start C_0, the graph of a step (one step on meta tensors: no values, no training), where
each end-of-step state tensor is produced, and the commitments of every step's batch."""
from __future__ import annotations

import functools
from dataclasses import dataclass

from ..protocol import merkle
from ..protocol.claims import step_claim
from ..protocol.dataset import batch_commitments, data_tree, dataset, initial_state, state_tree
from ..protocol.job import Job
from ..protocol.step import Graph, graph_of
from ..protocol.tensors import commit_many


@dataclass
class KernelGraph:
    """Per node of a step, the structures (name + operand descriptors) of its kernels: what
    the on-chain level 3 decides Case 1 against. The job commits
      kernel root = Merkle root over nodes of leaf(u32 kernel count || root of the node's
                    kernel structures)."""
    structures: list        # per node: list of kernel structure bytes
    unsettled: list         # (node, op name) whose decomposition has a MAT operand

    @functools.cached_property
    def trees(self) -> list:
        return [merkle.Tree(tuple(merkle.leaf_hash(k) for k in ks)) for ks in self.structures]

    @functools.cached_property
    def tree(self) -> merkle.Tree:
        return merkle.Tree(tuple(merkle.leaf_hash(t.n.to_bytes(4, "big") + t.root) for t in self.trees))

    @property
    def root(self) -> bytes:
        return self.tree.root

    def node_leaf(self, j: int) -> tuple[int, bytes, list]:
        """(kernel count, structure root, proof in the kernel root) of node j."""
        t = self.trees[j]
        return t.n, t.root, self.tree.proof(j)


def kernel_graph_of(job: Job, reuse: bool = True) -> KernelGraph:
    """The decomposition of every node of step 0, run on the job's own initial state and
    first batch: its structure depends on shapes, never on values (tested), so it is every
    step's. Nodes with the same op, attributes and input layouts (every layer's twin, every
    parameter's AdamW of one shape) decompose alike, so reuse runs one of them (reuse=False
    runs every node: the test that they agree). Costs one traced step that keeps no tensor,
    one run that keeps the distinct nodes' inputs (not every tensor of the step: at 125 M
    parameters that was 12-16 GB), and their decompositions: what a client posting a job,
    and every trainer before it stakes, pays once."""
    import tempfile

    from ..protocol.trace import decode_structure
    from ..trainer import Trainer
    from .oprun import MAT, OpRun
    with tempfile.TemporaryDirectory(prefix="verde-kernels-") as d:
        t = Trainer(job, d, "referee")
        tr = t.step_trace(0)
        if t.fault_step == 0:  # the kernels of a node are committed from step 0: it must compute
            from ..protocol.job import JobError
            f = t.faulted()
            raise JobError(f"the job's first step cannot be computed: node {f.node} ({f.nodes[-1].op}) faults (rule "
                           f"{f.rule}, docs/NUMERICS.md §14); fix the data (or program) it reads")
        decoded = [decode_structure(node.structure()) for node in tr.nodes]
        keys = [(op, attrs, tuple(refs.index(r) for r in refs), layouts)  # (which inputs are the same tensor)
                for (op, attrs, refs), layouts in zip(decoded, tr.layouts)] if reuse else list(range(len(tr.nodes)))
        first: dict = {}
        for j, key in enumerate(keys):
            first.setdefault(key, j)
        inputs = t.node_inputs(0, sorted(set(first.values())))
        kernels = {}
        for j, ins in inputs.items():
            try:
                ks = OpRun(tr.nodes[j].structure(), ins, job.spec.chunk).kernels(commit_all=False)
                kernels[j] = ([k.structure() for k in ks], any(d[0] == MAT for k in ks for d in k.descriptors))
            except OverflowError:  # an operand names a source past the format's u16 (a fold over > 65,535 elements)
                kernels[j] = None
    structures, unsettled = [], []
    for j, key in enumerate(keys):
        got, op = kernels[first[key]], decoded[j][0]
        if got is None:
            structures.append([])
            unsettled.append((j, f"{op}: more than 65,535 kernels"))
            continue
        structures.append(got[0])
        if got[1]:
            unsettled.append((j, op))
    return KernelGraph(structures, unsettled)


class Context:
    def __init__(self, job: Job):
        self.job = job
        self._data = dataset(job)

    @functools.cached_property
    def graph(self) -> Graph:
        return graph_of(self.job)

    @functools.cached_property
    def kernel_graph(self) -> KernelGraph:
        return kernel_graph_of(self.job)

    @functools.cached_property
    def initial_leaves(self) -> list[bytes]:
        return commit_many(initial_state(self.job).tensors(), self.job.spec.chunk)

    @functools.cached_property
    def initial_claim(self) -> bytes:
        return step_claim(state_tree(self.initial_leaves).root)

    @functools.cached_property
    def state_map(self) -> merkle.Tree:
        """The end-of-step producer of each state tensor, as a tree over 7-byte refs."""
        return merkle.Tree(tuple(merkle.leaf_hash(r.encode()) for r in self.graph.state_refs))

    @functools.cached_property
    def data_tree(self) -> merkle.Tree:
        return data_tree(self.job)

    def batch_commitments(self, step: int) -> list[bytes]:
        return batch_commitments(self.job, step, self._data)
