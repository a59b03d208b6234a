"""Kernel code shared by both compiled backends: elementwise.h (the per-element sequences of
the spec in portable C / CUDA C) and the opcode table their map kernels dispatch on."""
from __future__ import annotations

# name -> (opcode, operand count). Primitive opcodes are docs/NUMERICS.md §4's; 100+ are the
# fused activations of repops/reference/math.py and nn.py (elementwise.h). The CPU kernel
# (repops/cpu/kernels/elementwise.c) and the CUDA one (repops/cuda/kernels/primitives.cu)
# switch on these numbers.
MAP_OPS = {
    "add": (0, 2), "sub": (1, 2), "mul": (2, 2), "fma": (3, 3), "div": (4, 2), "sqrt": (5, 1), "neg": (6, 1),
    "abs": (7, 1), "min": (8, 2), "max": (9, 2), "eq": (10, 2), "lt": (11, 2), "le": (12, 2), "select": (13, 3),
    "rint": (14, 1), "floor": (15, 1), "trunc": (16, 1), "copy": (21, 1),
    "exp": (100, 1), "log": (101, 1), "sigmoid": (102, 1), "tanh": (103, 1), "erf": (104, 1), "sin": (105, 1),
    "cos": (106, 1), "silu": (107, 1), "gelu": (108, 1), "gelu_tanh": (109, 1),
    "silu_backward": (120, 2), "gelu_backward": (121, 2), "gelu_tanh_backward": (122, 2),
    "tanh_backward": (123, 2), "sigmoid_backward": (124, 2), "pow": (125, 2),
}
FUSED_MAPS = [name for name, (code, _) in MAP_OPS.items() if code >= 100]
# row-operator opcodes of kernels/nn.c and nn.cu
ROWS = {"softmax": 0, "log_softmax": 1, "softmax_backward": 2, "log_softmax_backward": 3, "attention_rows": 4,
        "attention_rows_backward": 5}
NORMS = {"layer_norm": 0, "layer_norm_backward": 1, "rms_norm": 2, "rms_norm_backward": 3}
