"""What a client's model does wrong, said once and the same way everywhere (writing a job,
`verde train`, `verde post`): the op, the line of the model that called it, the reason and
what to do, as a JobError (the CLI's exit 2). A refusal, an IndexError or torch's own shape
check raised while the program runs is the model's doing, never "a bug in verde".

The line comes from the program itself: torch.export keeps each node's Python stack
(`node.meta["stack_trace"]`) in the program file, and the node that raised is found from the
traceback's frame in the program's generated forward (torch.fx's line map)."""
from __future__ import annotations

import os
import re

import torch

import repops
from repops.errors import Fault, RepOpsError

from .job import JobError

# frames that are not the model's: torch's, RepOps', Verde's
_INTERNAL = tuple(os.path.dirname(os.path.abspath(m.__file__)) + os.sep for m in (torch, repops)) + (
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep,)

# what a model can raise while it runs (torch's own checks: RuntimeError, IndexError, ValueError)
MODEL_ERRORS = (RepOpsError, IndexError, RuntimeError, ValueError, TypeError)


def program_node(tb) -> torch.fx.Node | None:
    """The node whose line of a program's generated forward is innermost in traceback `tb`."""
    node = None
    while tb is not None:
        f = tb.tb_frame
        gm = f.f_locals.get("self")
        if isinstance(gm, torch.fx.GraphModule) and f.f_code is getattr(type(gm).forward, "__code__", None):
            i = (getattr(gm, "_lineno_map", None) or {}).get(tb.tb_lineno - f.f_code.co_firstlineno)
            if i is not None:
                node = list(gm.graph.nodes)[i]
        tb = tb.tb_next
    return node


def model_line(stack: str | None) -> str | None:
    """The innermost frame of a Python stack (torch.export's stack_trace text, or a
    traceback's) outside torch and Verde: the model's own line."""
    if not stack:
        return None
    lines = stack.strip("\n").splitlines()
    frames = [(lines[i].strip(), lines[i + 1].strip() if i + 1 < len(lines) and not lines[i + 1].lstrip().startswith(
        "File ") else "") for i in range(len(lines)) if lines[i].lstrip().startswith("File ")]
    mine = [f for f in frames if not _internal(f[0])]
    if not mine:
        return None
    where, code = mine[-1]
    m = re.match(r'File "(.*)", line (\d+), in (.*)', where)
    where = f"{m[1]}:{m[2]} ({m[3]})" if m else where
    return f"{where}: {code}" if code else where


def _internal(frame: str) -> bool:
    path = frame.split('"')[1] if frame.count('"') >= 2 else ""
    return path.startswith(_INTERNAL)


def user_frame(tb) -> str | None:
    """The innermost traceback frame outside torch and Verde (the model's line while torch.export runs it)."""
    import traceback
    return model_line("".join(traceback.format_tb(tb)))


def explain(e: BaseException, when: str) -> JobError | None:
    """e, raised while the program ran `when` ("at the first step", "at step 3"), as the
    model's error: a JobError naming the op and the model's line; None when e is not one a
    model causes (a fault is a result, not an error; anything else is left to propagate)."""
    if isinstance(e, (Fault, JobError)) or not isinstance(e, MODEL_ERRORS):
        return None
    node = program_node(e.__traceback__)
    if node is None and not isinstance(e, RepOpsError):
        return None  # not raised by the program's own ops: not the model's doing
    op = f"{node.target}" if node is not None else "an op of the backward pass or the optimizer step"
    line = model_line(node.meta.get("stack_trace")) if node is not None else None
    refused = isinstance(e, RepOpsError)
    why = f"{type(e).__name__}: {e}"
    fix = ("RepOps has no reproducible definition of it (docs/NUMERICS.md lists what it defines): write that line "
           "with defined ops, or keep it out of the model" if refused else
           "the model's own error on the job's batch (torch raises it too): fix that line of the model or the data "
           "it reads")
    return JobError(f"model.program {when}: {op}" + (f", called at {line}" if line else "") +
                    f", {'is refused' if refused else 'fails'}: {why}\n  Fix: {fix}")
