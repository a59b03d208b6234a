"""The job spec (docs/PROTOCOL.md §5): one YAML or JSON file naming the model, the
initial weights, the dataset and its batch schedule, the optimizer, the number of steps,
the checkpoint fan-out N and the tensor chunk size. An inference job (kind: inference) has
no optimizer: its program writes each batch's outputs into its state. Its id is the SHA-256 of its canonical
form, in which files appear by content hash only (so every party's copy has the same id).
A malformed or inconsistent file is a JobError naming the field."""
from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

SPEC_VERSION = 1
# The largest chunk (elements): every dispute and delivery move, which carries at most 4 chunks
# of 8-byte elements, stays under 100 KB of calldata and 10 M gas (docs/PROTOCOL.md §3; the
# registry refuses more: JobRegistry.MAX_CHUNK).
MAX_CHUNK = 2048


class JobError(ValueError):
    """The job file is malformed, inconsistent, or its files do not match their hashes."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class FileRef(_Strict):
    file: str = Field(description="path, relative to the job file")
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")


class ModelSpec(_Strict):
    name: Literal["mlp", "llama", "program"]
    config: dict = Field(default_factory=dict)
    program: FileRef | None = Field(None, description="name 'program': a torch.export program whose "
                                    "forward(*batch) returns the loss (offchain/protocol/program.py)")

    @model_validator(mode="after")
    def _known_fields(self):
        if self.name == "program":
            if self.program is None or self.config:
                raise ValueError("a 'program' model names its file (model.program: {file, sha256}) and has no config")
            return self
        if self.program is not None:
            raise ValueError(f"model.program is for name 'program', not {self.name!r}")
        from repops.models import BUILDERS
        cfg_cls = BUILDERS[self.name][0]
        fields = {f.name for f in dataclasses.fields(cfg_cls)}
        unknown = sorted(set(self.config) - fields)
        if unknown:
            raise ValueError(f"unknown {self.name} config field(s) {unknown}; known: {sorted(fields)}")
        for k, v in self.config.items():
            if not isinstance(v, (int, float)) or isinstance(v, bool):
                raise ValueError(f"config field {k!r} must be a number, got {v!r}")
        return self


class DataSpec(FileRef):
    batch_size: int = Field(gt=0)
    seed: int | None = Field(None, ge=0, lt=1 << 63, description="training: the batch schedule's seed; "
                             "inference: absent (the rows in order)")
    keys: list[str] | None = Field(None, min_length=1, description="a program's batch: the data file's tensors "
                                   "in the order forward(*batch) takes them")


class ScheduleSpec(_Strict):
    """The learning rate of step t: lr * warmup ramp * decay to min_lr_ratio * lr at the job's
    last step (repops.optim.Schedule, docs/NUMERICS.md §8)."""
    name: Literal["linear", "cosine"]
    warmup: int = Field(0, ge=0, description="steps of linear warmup from lr / warmup")
    min_lr_ratio: float = Field(0.0, ge=0, le=1, description="the last step's lr over lr")


ADAM_BETAS, ADAM_EPS = (0.9, 0.999), 1e-8
# Each optimizer's own fields and torch's defaults for them (torch.optim.AdamW, Adam, SGD): a
# spec holds exactly these, filled in, so a job is what torch would run and an SGD job carries
# no Adam field. AdamW's are the ones every AdamW job always wrote (its ids are unchanged).
OPTIMIZER_DEFAULTS = {
    "adamw": dict(betas=ADAM_BETAS, eps=ADAM_EPS, weight_decay=0.01),
    "adam": dict(betas=ADAM_BETAS, eps=ADAM_EPS, weight_decay=0.0),
    "sgd": dict(weight_decay=0.0),
}


def _is(value, default) -> bool:
    """value (as YAML or JSON gave it: a list, '1e-08' as a string) is the default."""
    try:
        return (tuple(map(float, value)) if isinstance(default, tuple) else float(value)) == default
    except (TypeError, ValueError):
        return False


class OptimizerSpec(_Strict):
    """repops.optim's AdamW, Adam or SGD, with torch's defaults for the fields a spec leaves
    out (OPTIMIZER_DEFAULTS). Optional fields a job leaves absent do not enter its id (an
    AdamW job without clipping keeps the id it had before SGD existed)."""
    name: Literal["adamw", "adam", "sgd"] = "adamw"
    lr: float = Field(gt=0)
    betas: tuple[float, float] | None = Field(None, description="adamw, adam (default (0.9, 0.999))")
    eps: float | None = Field(None, gt=0, description="adamw, adam (default 1e-8)")
    weight_decay: float | None = Field(None, ge=0, description="adamw: decoupled (default 0.01); adam, sgd: L2 "
                                       "added to the gradient (default 0)")
    momentum: float | None = Field(None, gt=0, lt=1, description="sgd only; absent = none")
    nesterov: bool | None = Field(None, description="sgd with momentum only")
    max_grad_norm: float | None = Field(None, gt=0, description="clip the gradients' global 2-norm to this "
                                        "before the step (torch.nn.utils.clip_grad_norm_); absent = no clipping")
    schedule: ScheduleSpec | None = Field(None, description="absent = the constant lr")

    @model_validator(mode="before")
    @classmethod
    def _torch_defaults(cls, data):
        if not isinstance(data, dict):
            return data
        data = dict(data)
        name = data.get("name", "adamw")
        if name == "sgd" and _is(data.get("betas", ADAM_BETAS), ADAM_BETAS) and _is(data.get("eps", ADAM_EPS), ADAM_EPS):
            data.pop("betas", None)  # (an SGD job file written before each optimizer had its own fields)
            data.pop("eps", None)
        for k, v in OPTIMIZER_DEFAULTS.get(name, {}).items():
            if data.get(k) is None:
                data[k] = v
        return data

    @field_validator("betas")
    @classmethod
    def _betas(cls, v):
        if v is not None and not all(0 <= b < 1 for b in v):
            raise ValueError(f"betas must lie in [0, 1), got {v}")
        return v

    @field_validator("nesterov")
    @classmethod
    def _false_is_absent(cls, v):
        return v or None

    @model_validator(mode="after")
    def _fields_of_the_optimizer(self):
        if self.name != "sgd" and (self.momentum is not None or self.nesterov):
            raise ValueError(f"momentum and nesterov are SGD's; optimizer {self.name!r} has betas")
        if self.name == "sgd" and (self.betas is not None or self.eps is not None):
            raise ValueError("betas and eps are Adam's; SGD has momentum (and nesterov)")
        if self.nesterov and self.momentum is None:
            raise ValueError("nesterov needs a momentum")
        return self

    def hyper(self) -> dict:
        """The keyword arguments of the repops.optim class `name` names."""
        common = dict(lr=self.lr, weight_decay=self.weight_decay, max_grad_norm=self.max_grad_norm)
        if self.name == "sgd":
            return dict(common, momentum=self.momentum or 0.0, nesterov=bool(self.nesterov))
        return dict(common, betas=tuple(self.betas), eps=self.eps)


class JobSpec(_Strict):
    version: Literal[1] = SPEC_VERSION
    kind: Literal["train", "inference"] | None = Field(None, description="absent = train; inference: a program "
                                                       "(program.export_inference) run on the rows in order")
    model: ModelSpec
    init: FileRef
    data: DataSpec
    optimizer: OptimizerSpec | None = Field(None, description="training only (required there)")
    steps: int = Field(gt=0, le=1_000_000)
    fanout: int = Field(4, ge=2, le=1024, description="checkpoint fan-out N of the step bisection")
    chunk: int = Field(256, gt=0, description=f"tensor commitment chunk, in elements (at most {MAX_CHUNK})")
    micro_batches: int | None = Field(None, ge=1, le=4096, description="M: a step's gradient is the mean of M "
                                      "micro-batch gradients summed in a fixed tree (docs/NUMERICS.md §11), so any "
                                      "world size dividing M trains the same bits; absent = 1")

    @field_validator("chunk")
    @classmethod
    def _chunk_fits_a_block(cls, v):
        if v > MAX_CHUNK:
            raise ValueError(f"chunk {v} is above the cap of {MAX_CHUNK} elements: a dispute move carries up to 4 "
                             "chunks (8 bytes per element) and must stay under 100 KB of calldata and 10 M gas to "
                             "be sent on a real chain (docs/PROTOCOL.md §3); the registry refuses such a job")
        return v

    @field_validator("micro_batches")
    @classmethod
    def _one_is_absent(cls, v):
        return None if v == 1 else v  # one canonical form (and job id) for the plain step

    @field_validator("kind")
    @classmethod
    def _train_is_absent(cls, v):
        return None if v == "train" else v

    @property
    def inference(self) -> bool:
        return self.kind == "inference"

    @model_validator(mode="after")
    def _fields_of_the_kind(self):
        if not self.inference:
            if self.optimizer is None or self.data.seed is None:
                raise ValueError("a training job needs an optimizer and data.seed (the batch schedule)")
            return self
        wrong = [f for f, v in (("optimizer", self.optimizer), ("data.seed", self.data.seed),
                                ("micro_batches", self.micro_batches)) if v is not None]
        if wrong or self.model.name != "program":
            raise ValueError(f"an inference job runs a program (model.name 'program', from program.export_inference) "
                             f"on the rows in order, with no optimizer, seed or micro-batches; remove {wrong}")
        return self

    @property
    def m(self) -> int:
        """The number of micro-batches of a step."""
        return self.micro_batches or 1

    def canonical(self) -> bytes:
        """Sorted-key compact JSON without file paths: the bytes the job id hashes."""
        d = self.model_dump(mode="json", exclude_none=True)  # (absent fields: the built-in jobs' ids as before)
        for ref in (d["init"], d["data"], d["model"].get("program", {})):
            ref.pop("file", None)
        return json.dumps(d, sort_keys=True, separators=(",", ":")).encode()

    @model_validator(mode="after")
    def _micro_batches_divide(self):
        if self.data.batch_size % self.m:
            raise ValueError(f"micro_batches {self.m} must divide data.batch_size {self.data.batch_size}")
        return self

    @model_validator(mode="after")
    def _schedule_fits(self):
        sch = self.optimizer and self.optimizer.schedule
        if sch is not None and sch.warmup >= self.steps:
            raise ValueError(f"optimizer.schedule.warmup {sch.warmup} must be below steps {self.steps}")
        return self

    @model_validator(mode="after")
    def _program_keys(self):
        if (self.model.name == "program") != (self.data.keys is not None):
            raise ValueError("data.keys names a program's batch tensors: required for model 'program', "
                             "not allowed for the built-in models")
        return self

    @property
    def job_id(self) -> bytes:
        return hashlib.sha256(self.canonical()).digest()


def _errors(e: ValidationError) -> str:
    lines = []
    for err in e.errors():
        where = ".".join(str(p) for p in err["loc"]) or "(top level)"
        lines.append(f"  {where}: {err['msg']}")
    return "\n".join(lines)


@dataclasses.dataclass(frozen=True)
class Job:
    """A validated spec with its files resolved and checked against their hashes."""
    spec: JobSpec
    root: Path

    def path(self, ref: FileRef) -> Path:
        return (self.root / ref.file).resolve()

    @property
    def job_id(self) -> bytes:
        return self.spec.job_id


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def parse(text: str, where: str = "job") -> JobSpec:
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise JobError(f"{where}: not valid YAML/JSON: {e}") from None
    if not isinstance(raw, dict):
        raise JobError(f"{where}: the job must be a mapping of fields, got {type(raw).__name__}")
    try:
        return JobSpec.model_validate(raw)
    except ValidationError as e:
        raise JobError(f"{where}: invalid job spec\n{_errors(e)}") from None


def dump(spec: JobSpec) -> str:
    return yaml.safe_dump(spec.model_dump(mode="json", exclude_none=True), sort_keys=False)
