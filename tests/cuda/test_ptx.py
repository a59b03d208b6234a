"""Every CUDA source under repops/ compiles to PTX for sm_90 with the numerics options of
repops.cuda.kernels, and fused multiply-adds appear only where the source asks for one."""
import re
import shutil
import subprocess

import pytest

from repops.cuda.kernels import NVCC_OPTIONS, SOURCES, sources


@pytest.mark.parametrize("src", sources(), ids=[p.name for p in sources()])
def test_cuda_source_compiles_to_ptx(src, tmp_path):
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not on PATH: install the CUDA toolkit to check that kernels compile")
    out = tmp_path / (src.stem + ".ptx")
    r = subprocess.run([nvcc, "-ptx", *NVCC_OPTIONS, f"-I{SOURCES}", str(src), "-o", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"nvcc failed on {src.name}:\n{r.stderr[-3000:]}"
    ptx = out.read_text()
    assert ".entry" in ptx, "no kernel entry point in the PTX"
    fused = len(re.findall(r"\bfma\.rn\.f32\b", ptx))
    assert (fused > 0) == ("__fmaf_rn" in src.read_text()), f"{fused} fma in {src.name}"
    assert not re.search(r"\.ftz\b|\.approx\b", ptx), "flush-to-zero or approximate instructions"
