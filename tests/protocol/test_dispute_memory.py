"""A trainer answering a dispute keeps commitments, not tensors: level 2 needs only the trace's
leaves, and levels 3-5 read one node's inputs, which a second run of the step keeps (and nothing
else). Keeping every node's outputs cost a 125 M-parameter trainer ~7 GB in one dispute
(benchmarks/scale.py). The inputs a re-run gives must be the full trace's, bit for bit."""
from offchain.protocol.corpus import token_rows
from offchain.protocol.dataset import write_job
from offchain.protocol.jobfile import load
from offchain.protocol.trace import NODE_OUT, STATE
from offchain.trainer import Trainer
from offchain.trainer.trainer import same_bits

LLAMA = {"vocab": 256, "d_model": 32, "n_layers": 2, "n_heads": 4, "d_ff": 64, "max_seq": 16}


def test_node_inputs_from_a_re_run_are_the_full_traces_bit_for_bit(tmp_path):
    job = load(write_job(tmp_path / "job", "llama", LLAMA, {"tokens": token_rows(16, rows=16)}, steps=2,
                         batch_size=2, fanout=2, chunk=64))
    full = Trainer(job, tmp_path / "full", "full")
    lean = Trainer(job, tmp_path / "lean", "lean")
    kept, trace = full.step_trace(1, keep=True), lean.step_trace(1)
    assert trace.outputs is None and trace.state_tensors is None  # level 2 holds no tensor
    assert [n.leaf() for n in trace.nodes] == [n.leaf() for n in kept.nodes]
    reads = [j for j, n in enumerate(trace.nodes) if any(r.kind in (NODE_OUT, STATE) for r in n.refs)]
    adamw = next(j for j in reads if trace.nodes[j].op == "repops.adamw_.default")  # reads state, writes it in place
    state_only = next(j for j in reads if all(r.kind != NODE_OUT for r in trace.nodes[j].refs))  # reads no node output
    picked = sorted(set(reads[::max(1, len(reads) // 8)]) | {adamw, state_only})
    runs = lean.reexecuted
    for j in picked:
        for i in range(len(trace.nodes[j].refs)):
            assert same_bits(lean.node_input(1, j, i), full.node_input(1, j, i)), (j, i, trace.nodes[j].op)
    # a node's inputs cost re-executing step 0 (to the state before step 1), and step 1 itself
    # only when the node reads an output of it; each node once
    runs_each = [1 + any(r.kind == NODE_OUT for r in trace.nodes[j].refs) for j in picked]
    assert lean.reexecuted - runs == sum(runs_each) and 1 in runs_each and 2 in runs_each
