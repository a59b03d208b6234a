"""What a job's files mean: the initial weights (safetensors: the model's state_dict), the
dataset (safetensors, or numpy .npz without pickles: `x` float32 [n, d_in] + `y` int64 [n]
for the MLP classifier, `tokens` int64 [n, seq + 1] for the Llama-style LM, the tensors
data.keys names for a program, each with n rows), the batches of the schedule (an inference
job's: the rows in order), and the state a checkpoint holds (docs/PROTOCOL.md §5)."""
from __future__ import annotations

import contextlib
import dataclasses
from pathlib import Path

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from . import merkle
from .job import FileRef, Job, JobError, JobSpec, ModelSpec, OptimizerSpec, DataSpec, dump, sha256_file
from .schedule import batch_rows
from .tensors import commit

KEYS = {"mlp": ("x", "y"), "llama": ("tokens",)}


def _load(job: Job, ref: FileRef, what: str) -> dict:
    path = job.path(ref)
    if path.suffix == ".npz":
        import numpy as np
        try:
            with np.load(path, allow_pickle=False) as z:
                return {k: torch.from_numpy(np.ascontiguousarray(z[k])) for k in z.files}
        except (OSError, ValueError) as e:
            raise JobError(f"{what} file {ref.file!r} is not a readable .npz of plain arrays (no pickles): {e}") from None
    try:
        return load_file(str(path))
    except (SafetensorError, OSError, ValueError) as e:
        raise JobError(f"{what} file {ref.file!r} is not a readable safetensors file: {e}") from None


def keys_of(spec: JobSpec) -> tuple:
    """The data tensors of a batch, in the order the model's loss takes them."""
    return tuple(spec.data.keys) if spec.data.keys is not None else KEYS[spec.model.name]


class _ParametersFromInit(torch.overrides.TorchFunctionMode):
    """While a built-in model is built for initial_state, which then copies every parameter
    from the job's init file: torch's random fills of a Parameter (nn.init's uniform_,
    normal_, ...) are skipped, everything else runs (buffers, deterministic fills). At 125 M
    parameters the fills are 0.6 of a fresh state's 1.0 s, and a trainer draws one for every
    state it re-derives (each dispute level it answers). Per thread: a torch function mode."""
    FILLS = {torch.Tensor.uniform_, torch.Tensor.normal_, torch.Tensor.random_, torch.Tensor.exponential_,
             torch.Tensor.bernoulli_, torch.Tensor.cauchy_, torch.Tensor.log_normal_, torch.Tensor.geometric_,
             *(getattr(torch.nn.init, n) for n in ("uniform_", "normal_", "trunc_normal_", "kaiming_uniform_",
                                                   "kaiming_normal_", "xavier_uniform_", "xavier_normal_",
                                                   "orthogonal_", "sparse_"))}  # (the mode sees these whole)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in self.FILLS:
            t = args[0] if args else kwargs.get("tensor")  # (nn.init hands its tensor over by keyword)
            if isinstance(t, torch.nn.Parameter):
                return t
        return func(*args, **kwargs)


def build_model(job: Job, device="cpu", params_from_init: bool = False):
    """The job's model on `device`; a program gets its weights from init (on meta: shapes only).
    params_from_init: the caller overwrites every parameter (random fills skipped)."""
    spec = job.spec
    if spec.model.name == "program":
        from . import program
        init = _load(job, spec.init, "init")
        state = {k: (torch.empty_like(v, device="meta") if str(device) == "meta" else v.to(device))
                 for k, v in init.items()}
        try:
            data = job.path(spec.model.program).read_bytes()
        except OSError as e:
            raise JobError(f"model.program file {spec.model.program.file!r}: {e.strerror}") from None
        return program.load(data, state, device)
    from repops.models import build
    with _ParametersFromInit() if params_from_init else contextlib.nullcontext():
        return build(spec.model.name, **spec.model.config).to(device)


def dataset(job: Job) -> dict:
    return _load(job, job.spec.data, "data")


def _check_program_fits(job: Job, data: dict) -> None:
    """The program loads, its batch is the data's, and one step runs under RepOps on meta
    tensors (every op defined, every shape consistent): what a client checks before paying."""
    import repops
    from repops import RepOpsError
    spec = job.spec
    n = {k: data[k].shape[0] if data[k].dim() else None for k in spec.data.keys}
    if None in n.values() or len(set(n.values())) != 1:
        raise JobError(f"data: the tensors {list(spec.data.keys)} must all have the same number of rows, got {n}")
    if next(iter(n.values())) == 0:
        raise JobError("data: the dataset has no rows")
    rows = next(iter(n.values()))
    if spec.inference and rows != spec.steps * spec.data.batch_size:
        raise JobError(f"an inference job reads every row once, in order: steps {spec.steps} x batch_size "
                       f"{spec.data.batch_size} must equal the data's {rows} rows (pad the data to whole batches)")
    model = build_model(job, "meta")
    _check_state(job, model)
    if spec.inference:
        from .program import OUTPUTS
        out = dict(model.named_buffers()).get(OUTPUTS)
        if out is None or out.shape[0] != rows or list(model.parameters()):
            raise JobError(f"model.program: not an inference program for {rows} rows (export it with "
                           "offchain.protocol.program.export_inference: frozen weights, buffer "
                           f"{OUTPUTS!r} [{rows}, ...])")
    from repops.distributed.micro import micro_batch
    b = micro_batch(tuple(t.to("meta") for t in batch(job, 0, data)), spec.m, 0)  # the program sees B/M rows
    _check_batch_shapes(model, spec.data.keys, b, spec.m)
    try:
        with repops.deterministic():
            if spec.inference:
                with torch.no_grad():
                    model.loss(*b)
                return
            loss = model.loss(*b)
            if not (isinstance(loss, torch.Tensor) and loss.dtype == torch.float32 and loss.dim() == 0):
                raise JobError(f"model.program: forward(*batch) must return the loss as a float32 scalar, got "
                               f"{type(loss).__name__} {getattr(loss, 'dtype', '')} {list(getattr(loss, 'shape', []))}")
            loss.backward()
    except (RepOpsError, IndexError, RuntimeError) as e:
        from .model_errors import explain, program_node
        if program_node(e.__traceback__) is not None:  # an op of the program: named, with the model's line
            raise explain(e, f"(one {'inference' if spec.inference else 'training'} step on meta tensors) does not "
                             "run under RepOps") from None
        if isinstance(e, (RepOpsError, IndexError)):
            raise JobError(f"model.program: one {'inference' if spec.inference else 'training'} step does not run "
                           f"under RepOps: {e}") from None
        raise JobError(f"model.program: the batch {[(k, str(t.dtype), list(t.shape)) for k, t in zip(spec.data.keys, b)]} "
                       f"does not fit the program: {str(e).splitlines()[0]}") from None


def _check_batch_shapes(model: torch.nn.Module, keys, b: tuple, m: int) -> None:
    """Each batch tensor against the shape and dtype the program was exported for (its
    inputs' recorded example): said per data key, before torch's own guard ("please
    re-export and specify dynamic_shapes") or a kernel's shape error would."""
    graph = getattr(model, "graph", None)
    wanted = [n.meta.get("val") for n in graph.nodes if n.op == "placeholder"] if graph is not None else []
    if len(wanted) != len(b):
        if wanted:
            raise JobError(f"model.program: forward takes {len(wanted)} batch tensors, data.keys names {len(b)} "
                           f"({list(keys)}): list the data keys forward(*batch) takes, in its order")
        return
    for k, t, w in zip(keys, b, wanted):
        if isinstance(w, torch.Tensor) and (tuple(t.shape) != tuple(w.shape) or t.dtype != w.dtype):
            rows = " (a micro-batch: batch_size / micro_batches rows)" if m > 1 else " (batch_size rows)"
            raise JobError(f"data key {k!r} has shape {list(t.shape)} {str(t.dtype).removeprefix('torch.')}, the "
                           f"model expects {list(w.shape)} {str(w.dtype).removeprefix('torch.')}{rows}: the program "
                           "was exported for that shape; export the job again from this data, or fix the data")


def _check_state(job: Job, model: torch.nn.Module) -> None:
    """Every state tensor (parameter, buffer, optimizer state) has a name of its own and at
    least one element: the client's delivery challenge asks for a chunk of one state tensor
    and JobRegistry.answer proves one of its elements, so on a tensor of 0 elements the
    accepted trainer could not answer and would forfeit its pay (docs/PROTOCOL.md §6)."""
    st, seen = state_of(job, model), set()
    for n, t in zip(st.names(), st.tensors()):
        if n in seen:
            raise JobError(f"model: two state tensors are named {n!r} (a submodule called `buffer` or `opt` gives its "
                           "parameters the names of buffers or optimizer state): rename that submodule")
        seen.add(n)
        if t.numel() == 0:
            raise JobError(f"model: state tensor {n!r} has shape {list(t.shape)}, no elements: a delivery challenge "
                           "on it could never be answered. Drop the empty parameter or buffer from the model, or give "
                           "it at least one element")


def check_fits(job: Job) -> None:
    spec = job.spec
    data = dataset(job)
    keys = keys_of(spec)
    if spec.model.name == "program":
        missing = sorted(set(keys) - set(data))
        if missing:
            raise JobError(f"data: the file has no tensors {missing} (data.keys); it has {sorted(data)}")
        return _check_program_fits(job, data)
    if sorted(data) != sorted(keys):
        raise JobError(f"data: a {spec.model.name} job needs tensors {list(keys)}, the file has {sorted(data)}")
    model = build_model(job, "meta")
    _check_state(job, model)
    cfg = model.cfg
    if spec.model.name == "mlp":
        x, y = data["x"], data["y"]
        if x.dtype != torch.float32 or x.dim() != 2 or x.shape[1] != cfg.d_in:
            raise JobError(f"data.x must be float32 [n, {cfg.d_in}], got {x.dtype} {list(x.shape)}")
        if y.dtype != torch.int64 or y.shape != (x.shape[0],) or (y.numel() and (y.min() < 0 or y.max() >= cfg.n_classes)):
            raise JobError(f"data.y must be int64 [{x.shape[0]}] with labels in [0, {cfg.n_classes})")
        n = x.shape[0]
    else:
        t = data["tokens"]
        if t.dtype != torch.int64 or t.dim() != 2 or not 2 <= t.shape[1] <= cfg.max_seq + 1:
            raise JobError(f"data.tokens must be int64 [n, seq + 1] with seq <= {cfg.max_seq}, got {t.dtype} {list(t.shape)}")
        if t.numel() and (t.min() < 0 or t.max() >= cfg.vocab):
            raise JobError(f"data.tokens must lie in [0, {cfg.vocab})")
        n = t.shape[0]
    if n == 0:
        raise JobError("data: the dataset has no rows")
    init = _load(job, spec.init, "init")
    want = {k: (v.dtype, tuple(v.shape)) for k, v in model.state_dict().items() if k in dict(model.named_parameters())}
    got = {k: (v.dtype, tuple(v.shape)) for k, v in init.items()}
    if want != got:
        missing, extra = sorted(set(want) - set(got)), sorted(set(got) - set(want))
        wrong = sorted(k for k in set(want) & set(got) if want[k] != got[k])
        raise JobError(f"init: the weights do not fit the model: missing {missing}, unexpected {extra}, "
                       f"wrong dtype/shape {wrong}")


def batch(job: Job, step: int, data: dict | None = None) -> tuple:
    """The batch of a step: its tensors in the model's loss(*batch) order."""
    data = data if data is not None else dataset(job)
    keys = keys_of(job.spec)
    n, b = data[keys[0]].shape[0], job.spec.data.batch_size
    rows = torch.arange(step * b, step * b + b) if job.spec.inference else torch.tensor(
        batch_rows(n, b, job.spec.data.seed, step))
    return tuple(data[k].index_select(0, rows) for k in keys)


def batch_commitments(job: Job, step: int, data: dict | None = None) -> list[bytes]:
    return [commit(t, job.spec.chunk) for t in batch(job, step, data)]


def data_tree(job: Job) -> merkle.Tree:
    """The data root D is this tree's root: leaf t = leaf(concatenated commitments of step
    t's batch tensors). The client builds it without training."""
    data = dataset(job)
    return merkle.Tree(tuple(merkle.leaf_hash(b"".join(batch_commitments(job, t, data)))
                             for t in range(job.spec.steps)))


@dataclasses.dataclass
class TrainingState:
    """The model and the optimizer (None in an inference job): what a checkpoint holds."""
    model: torch.nn.Module
    optimizer: object | None

    def tensors(self) -> list[torch.Tensor]:
        """Fixed order: parameters, buffers, then per parameter the optimizer's state
        (AdamW, Adam: m, v, b1t, b2t; SGD with momentum: buf), then a schedule's step counter."""
        opt = self.optimizer.state_tensors() if self.optimizer is not None else []
        return list(self.model.parameters()) + list(self.model.buffers()) + opt

    def names(self) -> list[str]:
        o = self.optimizer
        opt = [] if o is None else [f"opt.{n}.{k}" for n, _ in self.model.named_parameters() for k in o.STATE] + [
            f"opt.{k}" for k in o.global_state]
        return [n for n, _ in self.model_names()] + opt

    def model_names(self) -> list[tuple[str, str]]:
        """(state name, the model's own name) of each parameter and buffer, in state order: a
        buffer's state name is `buffer.` and its name. By structure, not by prefix: a
        submodule may be called `opt` or `buffer` (delivery.model_tensors)."""
        params = [(n, n) for n, _ in self.model.named_parameters()]
        return params + [(f"buffer.{n}", n) for n, _ in self.model.named_buffers()]

    def state_dict(self) -> dict:
        return {n: t.detach().cpu().contiguous() for n, t in zip(self.names(), self.tensors())}

    def load(self, tensors: dict) -> None:
        with torch.no_grad():
            for n, t in zip(self.names(), self.tensors()):
                t.copy_(tensors[n])



def state_tree(commitments) -> merkle.Tree:
    """The state root S is the root of this tree: one leaf per state tensor commitment."""
    return merkle.Tree(tuple(merkle.leaf_hash(c) for c in commitments))


def optimizer(spec: OptimizerSpec, params, steps: int):
    """The job's optimizer over `params` (repops.optim); steps: the job's, where a schedule ends."""
    from repops import optim
    sch = spec.schedule and optim.Schedule(spec.schedule.name, steps, spec.schedule.warmup, spec.schedule.min_lr_ratio)
    return {"adamw": optim.AdamW, "adam": optim.Adam, "sgd": optim.SGD}[spec.name](params, **spec.hyper(),
                                                                                   schedule=sch)


def state_of(job: Job, model: torch.nn.Module) -> TrainingState:
    """The model with the job's optimizer over its parameters (none in an inference job)."""
    spec = job.spec
    return TrainingState(model, None if spec.inference else optimizer(spec.optimizer, model.parameters(), spec.steps))


def initial_state(job: Job, device="cpu") -> TrainingState:
    model = build_model(job, device, params_from_init=True)
    if job.spec.model.name != "program":  # (a program is built from init)
        init = _load(job, job.spec.init, "init")
        with torch.no_grad():
            for n, p in model.named_parameters():
                p.copy_(init[n])
    return state_of(job, model)


def write_job(directory, model: str, config: dict, data: dict, steps: int, batch_size: int, *, seed: int = 0,
              lr: float = 3e-3, fanout: int = 4, chunk: int = 256, weights_seed: int = 0, micro_batches: int = 1,
              optimizer: dict | None = None) -> Path:
    """Create a job directory (init.safetensors, data.safetensors, job.yaml) and return the
    job file: what a client does before posting a job. optimizer: OptimizerSpec's fields
    (default AdamW with lr)."""
    from repops.models import build
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(weights_seed)
    m = build(model, **config)
    save_file({n: p.detach().contiguous() for n, p in m.named_parameters()}, str(d / "init.safetensors"))
    save_file({k: v.contiguous() for k, v in data.items()}, str(d / "data.safetensors"))
    spec = JobSpec(model=ModelSpec(name=model, config=config),
                   init=FileRef(file="init.safetensors", sha256=sha256_file(d / "init.safetensors")),
                   data=DataSpec(file="data.safetensors", sha256=sha256_file(d / "data.safetensors"),
                                 batch_size=batch_size, seed=seed),
                   optimizer=OptimizerSpec(**(optimizer or dict(lr=lr))), steps=steps, fanout=fanout, chunk=chunk,
                   micro_batches=micro_batches)
    path = d / "job.yaml"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(dump(spec))
    tmp.replace(path)
    return path


def read_tokens(text: str | None = None, tokens: str | None = None, vocab: int = 256) -> np.ndarray:
    """Token ids from a .npy array (1-D, any integer dtype) or, without one, a text file's
    bytes (vocabulary 256); every id must be below vocab."""
    ids = np.load(tokens, allow_pickle=False) if tokens else np.frombuffer(Path(text).read_bytes(), np.uint8)
    if ids.ndim != 1 or ids.dtype.kind not in "iu":
        raise JobError(f"{tokens}: token ids must be a 1-D integer array, got {ids.dtype} {ids.shape}")
    if ids.size and int(ids.max()) >= vocab:
        raise JobError(f"token {int(ids.max())} is not below the vocabulary size {vocab}")
    return ids


def token_windows(tokens, seq: int) -> torch.Tensor:
    """A 1-D token array cut into rows of seq + 1 (inputs and next-token targets), int64."""
    tokens = np.asarray(tokens)
    n = (len(tokens) - 1) // seq
    if n < 1:
        raise JobError(f"need more than {seq} tokens for one window of {seq} + 1, got {len(tokens)}")
    return torch.from_numpy(np.stack([tokens[i * seq:i * seq + seq + 1] for i in range(n)]).astype(np.int64))


def write_program_job(directory, module: torch.nn.Module, data: dict, keys, steps: int, batch_size: int, *,
                      seed: int = 0, lr: float = 3e-3, weight_decay: float = 0.01, fanout: int = 4,
                      chunk: int = 256, micro_batches: int = 1, optimizer: dict | None = None) -> Path:
    """A client's own model as a job: module.forward(*batch) returns the loss, the batch being
    data[k] for k in keys (batch_size / micro_batches rows each: a micro-batch). Exports the program, writes model.json,
    init.safetensors (its parameters and buffers as they are now), data.safetensors and
    job.yaml; returns the job file, checked as every party will load it. A model with active
    dropout draws its masks keyed by `seed` (the job's, which also orders the batches)."""
    from . import program
    keys = _keys_in(data, keys)
    prog, state, names = program.exported(module, tuple(data[k][:batch_size // micro_batches] for k in keys), seed)
    return _write_program(directory, prog, state, names, data, dict(
        data=dict(batch_size=batch_size, seed=seed, keys=keys),
        optimizer=OptimizerSpec(**(optimizer or dict(lr=lr, weight_decay=weight_decay))), steps=steps,
        fanout=fanout, chunk=chunk, micro_batches=micro_batches))


def write_inference_job(directory, module: torch.nn.Module, data: dict, keys, batch_size: int, *, fanout: int = 4,
                        chunk: int = 256) -> Path:
    """An inference job: module.forward(*batch) returns the outputs (one tensor, batch first),
    run on every row of data[k] (k in keys) once, in order, batch_size rows a step; the
    delivered state's `outputs` holds them (program.export_inference). Returns the job file."""
    from . import program
    keys = _keys_in(data, keys)
    rows = data[keys[0]].shape[0]
    prog, state, names = program.exported_inference(module, tuple(data[k][:batch_size] for k in keys), rows)
    return _write_program(directory, prog, state, names, data, dict(
        kind="inference", data=dict(batch_size=batch_size, keys=keys), steps=rows // batch_size, fanout=fanout,
        chunk=chunk))


def _keys_in(data: dict, keys) -> list:
    keys = list(keys)
    missing = sorted(set(keys) - set(data))
    if missing:
        raise JobError(f"keys {missing} are not in the data ({sorted(data)})")
    return keys


def _write_program(directory, prog: bytes, state: dict, names: dict, data: dict, fields: dict) -> Path:
    """model.json, init.safetensors, data.safetensors and job.yaml (the spec's other fields:
    `fields`, data's without its file), checked as every party will load them and by one real
    step on the first batch under RepOps (a refusal that shapes alone do not show surfaces
    here, naming the op and the model's line). Written into a fresh directory beside
    `directory` and moved into place only when every check passed: a failure leaves nothing.
    names: the client's state_dict keys -> state names (program.exported), kept in init's
    header (`verde.state_dict`) so a delivered model loads into the client's own module."""
    import json
    import shutil
    import tempfile
    d = Path(directory)
    d.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{d.name}.", dir=d.parent))
    try:
        (tmp / "model.json").write_bytes(prog)
        save_file({k: v.clone().contiguous() for k, v in state.items()}, str(tmp / "init.safetensors"),
                  metadata={STATE_DICT: json.dumps(names)})
        save_file({k: v.contiguous() for k, v in data.items()}, str(tmp / "data.safetensors"))
        ref = lambda name: FileRef(file=name, sha256=sha256_file(tmp / name))  # noqa: E731
        spec = JobSpec(model=ModelSpec(name="program", program=ref("model.json")), init=ref("init.safetensors"),
                       **{**fields, "data": DataSpec(**ref("data.safetensors").model_dump(), **fields["data"])})
        (tmp / "job.yaml").write_text(dump(spec))
        job = Job(spec, tmp)
        check_fits(job)  # what every party's jobfile.load checks (the hashes hold by construction)
        check_first_step(job)
        _move_into(tmp, d)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return d / "job.yaml"


STATE_DICT = "verde.state_dict"  # init.safetensors' header key: the client's state_dict names (JSON)


def user_names(job: Job) -> dict | None:
    """The client's state_dict keys -> state names that a program job's init records
    (_write_program), or None (a built-in model, a job written before they were recorded)."""
    import json
    from safetensors import safe_open
    if job.spec.model.name != "program" or job.path(job.spec.init).suffix != ".safetensors":
        return None
    try:
        with safe_open(str(job.path(job.spec.init)), "pt") as f:
            raw = (f.metadata() or {}).get(STATE_DICT)
        names = None if raw is None else json.loads(raw)
    except (SafetensorError, OSError, ValueError) as e:
        raise JobError(f"init: its header's {STATE_DICT!r} is not readable JSON: {e}") from None
    if names is not None and not (isinstance(names, dict) and all(
            isinstance(k, str) and isinstance(v, str) for k, v in names.items())):
        raise JobError(f"init: its header's {STATE_DICT!r} must map names to names")
    return names


def _move_into(tmp: Path, d: Path) -> None:
    """The checked files from `tmp` into `d`: one rename when `d` is new; into an existing
    directory file by file, its old job.yaml removed first and the new one moved last, so no
    job.yaml ever names files that are not yet there."""
    if not d.exists():
        tmp.rename(d)
        return
    (d / "job.yaml").unlink(missing_ok=True)
    for f in sorted(tmp.iterdir(), key=lambda f: f.name == "job.yaml"):
        f.replace(d / f.name)


def check_first_step(job: Job) -> None:
    """One real step of a program job on its first batch, on CPU under RepOps: what a trainer
    runs first. Its errors are the model's (model_errors.explain: the op, the model's line, the
    fix); a fault there means the job computes nothing a client would pay for."""
    import repops
    from .model_errors import explain
    from .onestep import run
    st = initial_state(job)
    try:
        with repops.deterministic():
            run(st, batch(job, 0), job.spec.m)
    except repops.Fault as e:
        raise JobError(f"model.program: the first step cannot be computed ({e}): a trainer would claim that fault "
                       "and the job would train nothing\n  Fix: correct the data (or program) its first batch "
                       "reads") from None
    except Exception as e:  # noqa: BLE001 - what the model causes is said as the model's; the rest propagates
        said = explain(e, "at the first step (one real step on the first batch, under RepOps)")
        if said is None:
            raise
        raise said from None
