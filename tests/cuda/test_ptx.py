"""Every CUDA source compiles, through the SAME function the device uses
(repops.cuda.compile.compile_source: NVRTC with the numerics options, nothing appended), to
PTX for sm_90 with no flush-to-zero, no approximate instruction, and fused multiply-adds only
where the source wrote __fmaf_rn. NVRTC needs no GPU, so this runs in CI."""
import re
import subprocess
import sys

import pytest

from repops.cuda.compile import NOT_IEEE as BAD
from repops.cuda.kernels import NVRTC_OPTIONS, sources

FMA = re.compile(r"\bfma\.rn\.f32\b")
# the probe: every __fmaf_rn becomes a rounded multiply and a rounded add (never contracted),
# so any fma left in the PTX is one the compiler made up
NO_FMA = "#define __fmaf_rn(a, b, c) __fadd_rn(__fmul_rn((a), (b)), (c))\n"


def _compile(src, **kw):
    from repops.cuda.compile import compile_source
    from repops.errors import BackendError
    try:
        return compile_source(src, "90", "ptx", **kw).read_text()
    except BackendError as e:
        if "not found" in str(e):
            pytest.skip(str(e))
        raise


@pytest.mark.parametrize("src", sources(), ids=[p.name for p in sources()])
def test_ptx_is_ieee_and_fuses_only_where_asked(src):
    ptx = _compile(src)
    assert ".entry" in ptx, "no kernel entry point in the PTX"
    assert not BAD.search(ptx), f"{src.name}: {BAD.search(ptx).group()} (flush-to-zero or an approximation)"
    if src.name == "matmul.cu":
        assert FMA.search(ptx), "the matmul's fma steps must be fused"
    probe = _compile(src, prelude=NO_FMA)
    assert not re.search(r"\bfma\.", probe), f"{src.name}: an fma the source did not write"


def test_the_check_sees_a_flush_to_zero_build():
    """The same path with -ftz=true on purpose: the PTX check above would catch it."""
    ptx = _compile(sources()[0], options=(*NVRTC_OPTIONS, "-ftz=true"))
    assert BAD.search(ptx)


def test_compile_cli_writes_one_ptx_per_source(tmp_path):
    _compile(sources()[0])  # skips without NVRTC
    r = subprocess.run([sys.executable, "-m", "repops.cuda.compile", "--ptx", str(tmp_path)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in tmp_path.glob("*.ptx")) == sorted(s.stem + ".ptx" for s in sources())
    assert all(not BAD.search(p.read_text()) for p in tmp_path.glob("*.ptx"))
