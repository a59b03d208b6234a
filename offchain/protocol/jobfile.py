"""A job as a client or trainer receives it: a job file (job.py's schema) whose files exist,
match the hashes it names, and fit its model (dataset.py). What every command loads."""
from __future__ import annotations

from pathlib import Path

from .dataset import check_fits
from .job import Job, JobError, parse, sha256_file


def load(path) -> Job:
    """Read, validate and check a job file; the files it names must match their hashes and
    fit the model (checked by offchain.protocol.dataset)."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise JobError(f"cannot read the job file {path}: {e.strerror}") from None
    job = Job(parse(text, str(path)), path.parent)
    refs = {"init": job.spec.init, "data": job.spec.data}
    if job.spec.model.program is not None:
        refs["model.program"] = job.spec.model.program
    for name, ref in refs.items():
        p = job.path(ref)
        if not p.is_file():
            raise JobError(f"{path}: {name}.file {ref.file!r} does not exist (looked at {p})")
        got = sha256_file(p)
        if got != ref.sha256:
            raise JobError(f"{path}: {name}.file {ref.file!r} has SHA-256 {got}, the job says {ref.sha256}: "
                           "the file was changed or the job names the wrong one")
    check_fits(job)
    return job
