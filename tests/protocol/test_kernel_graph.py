"""The kernel graph a client commits when it posts a job (every node of step 0 decomposed) is
computed once per distinct node: nodes with the same op, attributes and input layouts decompose
into the same kernel structures. Reusing must give exactly what decomposing every node gives."""
from offchain.dispute.context import kernel_graph_of
from offchain.protocol.corpus import token_rows
from offchain.protocol.dataset import write_job
from offchain.protocol.jobfile import load
from offchain.protocol.step import graph_of
from small_job import write_small_job

LLAMA = {"vocab": 256, "d_model": 32, "n_layers": 3, "n_heads": 4, "d_ff": 64, "max_seq": 16}


def test_reusing_twin_nodes_gives_every_node_s_own_decomposition(tmp_path):
    for job in (load(write_job(tmp_path / "llama", "llama", LLAMA, {"tokens": token_rows(16, rows=16)}, steps=2,
                               batch_size=2, fanout=2, chunk=64)),
                load(write_small_job(tmp_path / "mlp"))):
        reused, every = kernel_graph_of(job), kernel_graph_of(job, reuse=False)
        assert reused.structures == every.structures
        assert reused.unsettled == every.unsettled
        assert len(reused.structures) == len(graph_of(job).structures)
        assert len({tuple(s) for s in reused.structures}) < len(reused.structures)  # twins: reuse is not vacuous
