"""The Hugging Face families beyond the zoo (benchmarks/hf_families.py: Gemma 1-3, Phi, Qwen3,
OLMo, Falcon, BLOOM, GPT-J, MPT, Mamba, DeBERTa-v2, ...): one training step each trains under
RepOps with no refusal, its loss and gradients near native torch's (each op rounded once in
RepOps' own order), and the emulated CUDA kernels give the CPU backend's bits."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from hf_families import FAMILIES, probe  # noqa: E402

pytest.importorskip("transformers")


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_a_family_trains_near_native_and_the_emulated_gpu_gives_the_cpus_bits(family):
    row = probe(family, emu=True, export=False)  # (exporting each: the benchmark's program_same_bits)
    assert row["status"] == "ok", row.get("error")
    assert row["max_rel_diff"] < 1e-4, row
    assert row["cuda_emu_same_bits"], row
