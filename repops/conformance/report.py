"""docs/COVERAGE.md and the committed refusal table (repops/conformance/refused.json): every
float32 OpInfo and ModuleInfo, every sample, through the harness; Core ATen coverage from
what the sweep saw each top-level op do."""
from __future__ import annotations

import collections
import datetime
import json
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from repops.errors import RepOpsError

from . import harness as H

ROOT = Path(__file__).resolve().parents[2]
COVERAGE = ROOT / "docs" / "COVERAGE.md"
REFUSED = Path(__file__).with_name("refused.json")
COMMAND = "python -m repops.conformance"


def family(op_id: str) -> str:
    """torch's own grouping of its OpInfos (torch/testing/_internal/opinfo/definitions)."""
    head = op_id.split(".")[0]
    if op_id.startswith("nn.functional."):
        return "nn.functional"
    return head if head in ("linalg", "special", "fft", "masked", "signal", "sparse", "nn") and "." in op_id \
        else "torch"


class Observe(TorchDispatchMode):
    """Pushed inside repops.deterministic(): what each top-level aten op did (ran on float
    operands, ran on integers only, or refused with which message)."""

    def __init__(self, seen: dict):
        super().__init__()
        self.seen = seen

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        rec = self.seen.setdefault(func, {"float": 0, "integer": 0, "refused": None})
        try:
            out = func(*args, **kwargs)
        except RepOpsError as e:
            rec["refused"] = rec["refused"] or H._first_line(e)
            raise
        floats = any(isinstance(t, torch.Tensor) and t.is_floating_point() for t in tree_flatten((args, kwargs))[0])
        rec["float" if floats else "integer"] += 1
        return out


def core_aten() -> list:
    """The Core ATen opset: overloads tagged torch.Tag.core, without the sym_* shape queries."""
    ops = []
    for name in dir(torch.ops.aten):
        packet = getattr(torch.ops.aten, name)
        if isinstance(packet, torch._ops.OpOverloadPacket) and not name.startswith("sym_"):
            ops += [getattr(packet, o) for o in packet.overloads() if torch.Tag.core in getattr(packet, o).tags]
    return sorted(ops, key=str)


def core_coverage(seen: dict) -> list[tuple[str, str, str]]:
    """(op, how, detail) per Core ATen overload: how is 'spec' (a RepOps definition), 'exact'
    (data movement, native), 'decomposes' (torch's decomposition ran on RepOps in a sample),
    'integers' (ran on integer operands only, exactly) or 'gap' (with the reason)."""
    from repops import aten as A
    from repops.mode import _decompositions
    rows = []
    for op in core_aten():
        rec = seen.get(op, {"float": 0, "integer": 0, "refused": None})
        if op in A.REGISTRY:
            rows.append((str(op), "spec", ""))
        elif op in A.EXACT:
            rows.append((str(op), "exact", ""))
        elif rec["float"]:
            rows.append((str(op), "decomposes", ""))
        elif rec["integer"] and not rec["refused"]:
            rows.append((str(op), "integers", "ran on integer operands (exact); no float sample reached it"))
        elif rec["refused"]:
            rows.append((str(op), "gap", rec["refused"]))
        else:
            why = "torch's decomposition exists but no OpInfo sample reached the op" if op in _decompositions() \
                else "no RepOps definition and no decomposition in torch's table"
            rows.append((str(op), "gap", why))
    return rows


def sweep(limit: int | None = None, progress: bool = True):
    """Every float32 OpInfo and ModuleInfo (limit: samples per op) -> (ops, modules, seen)."""
    from tqdm import tqdm
    seen: dict = {}
    was = H.OBSERVER
    H.OBSERVER = lambda: Observe(seen)
    try:
        ops = {}
        for op in tqdm(H.float32_opinfos(), desc="OpInfo", disable=not progress):
            ops[H.opinfo_id(op)] = H.check_opinfo(op, limit)
        modules = {}
        for info in tqdm(H.float32_moduleinfos(), desc="ModuleInfo", disable=not progress):
            modules[info.name] = H.check_moduleinfo(info, limit)
    finally:
        H.OBSERVER = was
    return ops, modules, seen


def edges(limit: int | None = None, progress: bool = True) -> str:
    """Every float32 OpInfo on its reference inputs: the counts, then each op whose worst outcome
    is neither a pass nor a refusal (the first such sample's message)."""
    from tqdm import tqdm
    ops = {H.opinfo_id(op): H.check_opinfo(op, limit, reference=True)
           for op in tqdm(H.float32_opinfos(), desc="OpInfo reference inputs", disable=not progress)}
    lines = [f"{dict(_counts(ops))} over {sum(n for _, n in ops.values())} samples"]
    lines += [f"{k}: {o.status}: {o.detail}" for k, (o, _) in sorted(ops.items()) if o.status not in (H.PASS, H.REFUSED)]
    return "\n".join(lines)


def _counts(results: dict) -> collections.Counter:
    return collections.Counter(o.status for o, _ in results.values())


def _row(label, results) -> str:
    c, n = _counts(results), len(results)
    return (f"| {label} | {c[H.PASS]} | {c[H.REFUSED]} | {c[H.WRONG]} | {c[H.FOREIGN]} | {n} | "
            f"{100 * c[H.PASS] / max(n, 1):.1f} % |")


def _cell(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")


def markdown(ops: dict, modules: dict, core: list, limit: int | None) -> str:
    covered = [r for r in core if r[1] != "gap"]
    how = collections.Counter(r[1] for r in core)
    lines = [
        "# Coverage: PyTorch's own test suites under RepOps",
        "",
        f"Generated by `{COMMAND}` (do not edit by hand) with torch {torch.__version__}, "
        f"{'every sample' if limit is None else f'the first {limit} samples'} of every float32 OpInfo "
        "(`op_db`) and ModuleInfo (`module_db`) on the CPU, forward and the gradients of the sum of the "
        f"outputs, on {datetime.date.today().isoformat()}.",
        "",
        "Each op is **pass** (every sample: native torch's result to rounding, "
        f"rtol {H.RTOL:g} / atol {H.ATOL:g}, or binary64's where native float32 lost more, and the same bits "
        "on 1 and 2 threads), **refused** (a sample raised RepOps' own error, quoted below), **WRONG** "
        "(another result, shape or dtype) or **FOREIGN** (another exception type). WRONG and FOREIGN are "
        "defects: tests/repops/test_opinfo.py fails on them, and on a refusal not listed here "
        "(repops/conformance/refused.json).",
        "",
        "| | pass | refused | WRONG | FOREIGN | total | pass |",
        "|---|---|---|---|---|---|---|",
        _row("float32 OpInfos", ops),
        _row("float32 ModuleInfos", modules),
        "",
        f"**Core ATen** (overloads tagged `torch.Tag.core`, without `sym_*`): {len(covered)} of {len(core)} covered "
        f"({how['spec']} by a RepOps definition, {how['exact']} exact data movement, {how['decomposes']} by "
        f"torch's decomposition into ops RepOps defines, {how['integers']} on integers only); "
        f"{how['gap']} gaps, named below.",
        "",
        "## By family",
        "",
        "| family | pass | refused | WRONG | FOREIGN | total | pass |",
        "|---|---|---|---|---|---|---|",
    ]
    groups = collections.defaultdict(dict)
    for k, v in ops.items():
        groups[family(k)][k] = v
    groups["nn (ModuleInfo)"] = modules
    for g in sorted(groups, key=lambda g: -len(groups[g])):
        lines.append(_row(g, groups[g]))
    bad = [(k, o) for k, (o, _) in {**ops, **modules}.items() if o.status in (H.WRONG, H.FOREIGN)]
    lines += ["", "## WRONG and FOREIGN", ""]
    lines += [f"- `{k}`: {o.status}: {_cell(o.detail)}" for k, o in bad] or ["None."]
    lines += ["", "## Core ATen gaps", "", "| overload | reason |", "|---|---|"]
    lines += [f"| `{op}` | {_cell(why)} |" for op, h, why in core if h == "gap"]
    lines += ["", "## Refusals by family", "",
              "The first sample's refusal of each op (an op may be refused for one sample and pass others)."]
    for g in sorted(groups):
        refused = [(k, o) for k, (o, _) in sorted(groups[g].items()) if o.status == H.REFUSED]
        if refused:
            lines += ["", f"### {g} ({len(refused)})", "", "| op | refusal |", "|---|---|"]
            lines += [f"| `{k}` | {_cell(o.detail)} |" for k, o in refused]
    return "\n".join(lines) + "\n"


def write(limit: int | None = None, progress: bool = True) -> dict:
    ops, modules, seen = sweep(limit, progress)
    core = core_coverage(seen)
    COVERAGE.write_text(markdown(ops, modules, core, limit))
    refused = {k: o.detail for k, (o, _) in sorted({**ops, **modules}.items()) if o.status == H.REFUSED}
    REFUSED.write_text(json.dumps(refused, indent=1, sort_keys=True) + "\n")
    return {"opinfo": dict(_counts(ops)), "moduleinfo": dict(_counts(modules)),
            "core": f"{sum(r[1] != 'gap' for r in core)}/{len(core)}"}
