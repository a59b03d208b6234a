"""The CUDA kernels as a table: name -> (source, C parameter types). One table drives the
CuPy device runtime, the CPU emulator's generated launchers and the ptx check."""
from __future__ import annotations

from pathlib import Path

SOURCES = Path(__file__).parent / "kernels"

# numerics contract (docs/NUMERICS.md): no contraction, no flush-to-zero, IEEE div/sqrt
NVRTC_OPTIONS = ("--fmad=false", "--ftz=false", "--prec-div=true", "--prec-sqrt=true")
NVCC_OPTIONS = ("-arch=sm_90",) + NVRTC_OPTIONS

F, I, Q = "float", "int", "long long"
CF, MF, CI, MI, CB, MB = "const float *", "float *", "const int *", "int *", "const unsigned char *", "unsigned char *"

KERNELS = {
    "prim_map_f32": ("primitives.cu", (I, CF, Q, CF, Q, CF, Q, MF, Q)),
    "prim_compare_f32": ("primitives.cu", (I, CF, Q, CF, Q, MB, Q)),
    "prim_select_f32": ("primitives.cu", (CB, Q, CF, Q, CF, Q, MF, Q)),
    "prim_ldexp_f32": ("primitives.cu", (CF, Q, CI, Q, MF, Q)),
    "prim_from_int32_f32": ("primitives.cu", (CI, Q, MF, Q)),
    "prim_to_int32_f32": ("primitives.cu", (I, CF, Q, MI, Q)),
    "fold_f32": ("fold.cu", (I, CF, MF, Q, Q, F)),
    "exp_f32": ("exp.cu", (CF, MF, Q)),
    "matmul_f32": ("matmul.cu", (CF, CF, MF, I, I, I)),
}

# launch geometry constants the sources assume
THREADS = 256                 # matmul.cu needs exactly this; the GPU uses it for every kernel
MATMUL_TILE = (128, 128)      # BM, BN of matmul.cu


def sources() -> list[Path]:
    return sorted(SOURCES.glob("*.cu"))
