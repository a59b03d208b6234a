"""The CUDA kernels as a table: name -> (source, C parameter types). One table drives the
CuPy device runtime, the CPU emulator's generated launchers and the ptx check."""
from __future__ import annotations

from pathlib import Path

SOURCES = Path(__file__).parent / "kernels"

# numerics contract (docs/NUMERICS.md): no contraction, no flush-to-zero, IEEE div/sqrt
NVRTC_OPTIONS = ("--fmad=false", "--ftz=false", "--prec-div=true", "--prec-sqrt=true")

F, I, Q, U = "float", "int", "long long", "unsigned"
CF, MF, CI, MI, CB, MB = "const float *", "float *", "const int *", "int *", "const unsigned char *", "unsigned char *"
CU, MU, CQ, MQ = "const unsigned *", "unsigned *", "const long long *", "long long *"
# an elementwise operand's 4 element strides, and the output's n and inner dims (common.cuh RP_STRIDES)
S4, DIMS = (Q,) * 4, (Q,) * 4
# matmul: A, B, C, M, N, K; A's and B's strides; the batch's 2 dims; a bias (flag, its row,
# column and 2 batch strides)
MATMUL = (CF, CF, MF, I, I, I, *(Q,) * 9, CF, I, *(Q,) * 4)
ADAMW_SLOTS = 32  # parameters per multi-tensor AdamW launch (kernels/optim.cu RP_ADAMW_SLOTS)

KERNELS = {
    "prim_map_f32": ("primitives.cu", (I, CF, *S4, CF, *S4, CF, *S4, MF, *DIMS)),
    "prim_compare_f32": ("primitives.cu", (I, CF, *S4, CF, *S4, MB, *DIMS)),
    "prim_select_f32": ("primitives.cu", (CB, *S4, CF, *S4, CF, *S4, MF, *DIMS)),
    "prim_ldexp_f32": ("primitives.cu", (CF, *S4, CI, *S4, MF, *DIMS)),
    "prim_from_int32_f32": ("primitives.cu", (CI, *S4, MF, *DIMS)),
    "prim_to_int32_f32": ("primitives.cu", (I, CF, *S4, MI, *DIMS)),
    "rope_f32": ("primitives.cu", (I, CF, *S4, Q, CF, *S4, CF, *S4, MF, *DIMS)),  # (x's pair strides, its lane)
    "fold_f32": ("fold.cu", (I, CF, MF, Q, Q, CF, I)),
    "matmul_f32": ("matmul.cu", MATMUL),
    "matmul_small_f32": ("matmul.cu", MATMUL),  # (TUNING's MATMUL_SMALL_* tile)
    "gather_u32": ("indexing.cu", (CU, CQ, CU, MU, Q, Q, Q, Q)),
    "onehot_u32": ("indexing.cu", (CQ, CU, Q, CU, Q, MU, Q, Q)),
    "index_check_i64": ("indexing.cu", (CQ, Q, Q, Q, Q, Q, Q, Q, Q, Q, Q, I, MQ)),  # repops/faults.py's index rule, read at settle
    "finite_check_f32": ("indexing.cu", (CF, Q, Q, Q, Q, Q, Q, Q, Q, MQ)),  # faults.finite's rule, read at settle
    "embedding_poison_f32": ("indexing.cu", (CQ, CF, MQ, Q, Q, Q, I)),
    "embedding_backward_f32": ("indexing.cu", (CQ, CF, CQ, MF, Q, Q, Q, Q)),
    "philox_keep_u8": ("random.cu", (CI, U, U, U, MB, Q)),
    "rows_f32": ("nn.cu", (I, CF, CF, I, CB, CF, MF, Q, Q, Q, *(Q,) * 6)),  # ..., the mask's strides
    "norm_f32": ("nn.cu", (I, CF, CF, I, CF, I, CF, CF, MF, MF, MF, MF, Q, Q)),
    "colsum_f32": ("nn.cu", (CF, CF, I, MF, I, MF, Q, Q, I)),
    "adamw_scalars": ("optim.cu", (MF, MF, CF, MF)),
    "adamw_f32": ("optim.cu", (MF, CF, MF, MF, CF, CF, Q)),
    # one group's parameters, ADAMW_SLOTS a launch: (b1t, b2t) and (p, g, m, v, n) per slot
    "adamw_foreach_scalars": ("optim.cu", (CF, MF, I, *(MF, MF) * ADAMW_SLOTS)),
    "adamw_foreach_f32": ("optim.cu", (CF, CF, *(MF, CF, MF, MF, Q) * ADAMW_SLOTS)),
    "sha256_leaves": ("sha256.cu", (CB, Q, Q, Q, MB)),  # commitments where a tensor lives (offchain chunk trees)
    "sha256_subtrees": ("sha256.cu", (CB, Q, I, MB)),
}

# Launch geometry. THREADS: elementwise kernels on the GPU. ROW_THREADS: the most threads of a
# block that works on one row (softmax family, norms) or on a group of columns (folds, column
# sums: COLUMNS of them per block, fewer where that leaves SMs idle). TUNING: compile-time
# shapes (-D flags for NVRTC and the emulator alike): the matmul tiles, and REPOPS_STAGE, the
# floats a row kernel stages in shared memory per chain (repops/cuda/kernels/block.cuh). They
# never change bits, only speed (benchmarks/repops_cuda.py --sweep measures other tiles).
THREADS = 256
ROW_THREADS = 256
COLUMNS = 4
SMS = 132  # an H100 SXM's streaming multiprocessors: a launch of fewer blocks leaves SMs idle
# MATMUL_SMALL_*: matmul_small_f32's tile, which a product runs on where the MATMUL_ tiles would be
# fewer blocks than SMS (4x the blocks; the same bits: any tile gives them).
TUNING = {"MATMUL_BM": 128, "MATMUL_BN": 128, "MATMUL_BK": 16, "MATMUL_WM": 64, "MATMUL_WN": 32,
          "MATMUL_SMALL_BM": 64, "MATMUL_SMALL_BN": 64, "MATMUL_SMALL_BK": 16, "MATMUL_SMALL_WM": 32,
          "MATMUL_SMALL_WN": 64, "REPOPS_STAGE": 1024}


def defines(tuning: dict) -> tuple:
    return tuple(f"-D{k}={v}" for k, v in sorted(tuning.items()))


def matmul_geometry(tuning: dict, tile: str = "MATMUL") -> tuple[int, int, int]:
    """(BM, BN, threads per block) of matmul.cu's `tile` ("MATMUL": matmul_f32's, "MATMUL_SMALL":
    matmul_small_f32's) under `tuning`."""
    bm, bn = tuning[f"{tile}_BM"], tuning[f"{tile}_BN"]
    return bm, bn, (bm // tuning[f"{tile}_WM"]) * (bn // tuning[f"{tile}_WN"]) * 32


SHARED = Path(__file__).parents[1] / "kernels"   # per-element code shared with the CPU kernels


def sources() -> list[Path]:
    return sorted(SOURCES.glob("*.cu"))


def headers() -> list[Path]:
    """Every header a kernel may include: ours and the shared per-element code."""
    return sorted(SOURCES.glob("*.cuh")) + sorted(SHARED.glob("*.h"))
