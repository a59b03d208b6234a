"""Issue #22's audit: every `verde` subcommand answers a mistake a user can make with what
is wrong and what to do, exit code 2 and no traceback; anything else is exit 1 with the
advice to re-run with --debug, which shows the traceback. In process (`main(argv)`), no node
needed: the cases fail before or at connecting."""
import sys
from pathlib import Path

import pytest

from offchain.cli import main

sys.path.insert(0, str(Path(__file__).resolve().parent / "protocol"))
from small_job import write_small_job  # noqa: E402


@pytest.fixture(scope="module")
def job_file(tmp_path_factory):
    return str(write_small_job(tmp_path_factory.mktemp("cli-errors") / "job"))


def _run(argv, capsys, monkeypatch, env=None):
    for k in ("VERDE_PRIVATE_KEY", "VERDE_KEYSTORE", "VERDE_CHAIN", "VERDE_DEPLOYMENT", "VERDE_CONFIG", "VERDE_DEBUG"):
        monkeypatch.delenv(k, raising=False)
    for k, v in (env or {}).items():
        monkeypatch.setenv(k, v)
    try:
        rc = main(argv)
    except SystemExit as e:  # argparse's usage errors
        rc = e.code
    out = capsys.readouterr()
    return rc, out.out + out.err


CASES = [  # (argv, what the message must say); {job} is a valid job file, {tmp} a fresh directory
    (["train", "/nonexistent/job.yaml"], "cannot read the job file"),
    (["train", "README.md"], "Fix:"),
    (["train", "{job}", "--world-size", "2"], "micro_batches 1: a world size of 2 does not divide it"),
    (["train", "{job}", "--world-size", "0"], "0 is not between 1 and 4096"),
    (["agent", "{job}", "--workdir", "{tmp}", "--world-size", "3", "--chain", "embedded"], "a world size of 3"),
    (["agent", "{job}", "--workdir", "{tmp}", "--behaviour", "nonsense"], "bad --behaviour"),
    (["node", "--port", "-1"], "is not between 1 and 65535"),
    (["status", "1", "--chain", "anvil:99999"], "bad port"),
    (["status", "1", "--chain", "rpc:http://127.0.0.1:9"], "cannot reach an Ethereum node"),
    (["status", "1", "--chain", "rpc:ftp://x"], "not an http(s) URL"),
    (["status", "1", "--chain", "bogus"], "unknown chain backend"),
    (["deploy", "--chain", "embedded", "--out", "/nonexistent/dir/d.json"], "not a writable directory"),
    (["deploy", "--chain", "embedded", "--delivery-window-s", "-5"], "is not between 0"),
    (["withdraw", "--chain", "embedded", "--deployment", "/nonexistent.json"], "cannot read the deployment file"),
    (["post", "{job}", "--payment", "0", "--stake", "1"], "must be positive"),
    (["post", "{job}", "--payment", "1", "--stake", "1", "--max-trainers", "0"], "is not between 1 and 255"),
    (["challenge", "1", "{job}", "--trainer", "0x12"], "is not an Ethereum address"),
    (["challenge", "1", "{job}", "--trainer", "0x" + "11" * 20, "--chunk", "-1"], "is not between 0"),
    (["release", "x"], "invalid int value"),
    (["fetch", "1", "/nonexistent/job.yaml", "--from", "{tmp}"], "cannot read the job file"),
    (["status", "1", "--chain", "embedded"], "cannot read the deployment file"),
]


@pytest.mark.parametrize("argv,says", CASES, ids=[" ".join(a[:2]) + f"-{i}" for i, (a, _) in enumerate(CASES)])
def test_a_user_s_mistake_is_exit_2_with_what_to_do(argv, says, job_file, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(Path(__file__).resolve().parents[1])
    argv = [a.format(job=job_file, tmp=str(tmp_path)) for a in argv]
    rc, out = _run(argv, capsys, monkeypatch, {"VERDE_DEPLOYMENT": str(tmp_path / "none.json")})
    assert rc == 2, out
    assert says in out, out
    assert "Traceback" not in out, out


def test_a_bad_key_is_named_and_a_missing_one_only_where_a_command_signs(capsys, monkeypatch, tmp_path):
    rc, out = _run(["key", "show"], capsys, monkeypatch, {"VERDE_PRIVATE_KEY": "0x1234"})
    assert rc == 2 and "not a valid secp256k1 private key" in out, out
    rc, out = _run(["key", "show"], capsys, monkeypatch)
    assert rc == 2 and "VERDE_PRIVATE_KEY" in out, out
    # reading needs no key: the error is the unreachable node, not the key
    rc, out = _run(["status", "1", "--chain", "rpc:http://127.0.0.1:9"], capsys, monkeypatch)
    assert rc == 2 and "cannot reach" in out and "key" not in out, out


def test_an_unexpected_error_is_exit_1_without_a_traceback_unless_debug(capsys, monkeypatch):
    from offchain.cli import client

    def broken(args):
        raise ZeroDivisionError("a bug")
    monkeypatch.setattr(client, "add", _adding(client.add, broken))
    rc, out = _run(["withdraw"], capsys, monkeypatch)
    assert rc == 1 and "unexpected ZeroDivisionError: a bug" in out and "--debug" in out, out
    assert "Traceback" not in out
    with pytest.raises(ZeroDivisionError):
        _run(["--debug", "withdraw"], capsys, monkeypatch)


def _adding(add, fn):
    """client.add, with `withdraw` dispatching to fn."""
    def patched(sub):
        add(sub)
        sub.choices["withdraw"].set_defaults(fn=fn)
    return patched


def test_training_a_job_whose_step_faults_says_where_and_what_to_fix(tmp_path, capsys, monkeypatch):
    """Issue #42: `verde train` on data whose step 3 divides by zero names the step, the node and
    the element, the fault claim a trainer commits, and the fix (exit 2, no traceback)."""
    from small_job import write_division_fault_job
    rc, out = _run(["train", str(write_division_fault_job(tmp_path / "job"))], capsys, monkeypatch)
    out = " ".join(out.split())
    assert rc == 2 and "Traceback" not in out, out
    assert "step 3 of 6 cannot be computed" in out and "aten.floor_divide" in out and "rule division" in out, out
    assert "integer division by zero" in out and "fault claim" in out and "Fix: correct the data" in out, out


def test_a_reader_that_stops_early_gets_no_traceback():
    """`verde agent JOB --behaviour help | head -1` printed a BrokenPipeError traceback."""
    import subprocess
    import sys
    from pathlib import Path
    verde = Path(sys.executable).parent / "verde"
    r = subprocess.run(f"'{verde}' agent x --behaviour help | head -1", shell=True, capture_output=True, text=True,
                       timeout=120)
    assert r.stdout.strip() and "Traceback" not in r.stderr and "BrokenPipe" not in r.stderr, r.stderr[-2000:]


def test_posting_a_job_whose_first_step_cannot_be_computed_is_refused_before_any_chain(tmp_path, capsys, monkeypatch):
    """`verde post` runs the first step on the first batch (what every trainer runs first): a
    job file not written by `write_program_job` (by hand, by another tool, by an older Verde) whose
    first batch divides by zero would pay for nothing. It is refused with the reason before the
    chain is contacted (the chain given here does not exist), exit 2."""
    import torch

    from offchain.protocol import dataset
    from offchain.protocol.schedule import batch_rows
    from small_job import Ratio
    ids = torch.randint(1, 20, (32, 5), generator=torch.Generator().manual_seed(5))
    ids[batch_rows(32, 4, 0, 0)[0], 1] = 0  # a zero divisor in the first batch
    with monkeypatch.context() as m:
        m.setattr(dataset, "check_first_step", lambda job: None)  # (a writer that does not run the model)
        job = dataset.write_program_job(tmp_path / "job", Ratio(), {"ids": ids}, ["ids"], steps=2, batch_size=4,
                                        fanout=2, chunk=64)
    rc, out = _run(["post", str(job), "--payment", "1", "--stake", "1", "--chain", "anvil:99999"], capsys, monkeypatch)
    out = " ".join(out.split())
    assert rc == 2 and "Traceback" not in out, out
    assert "the job cannot be posted" in out and "first step cannot be computed" in out and "Fix:" in out, out
    assert "bad port" not in out and "cannot reach" not in out, out


def test_a_chain_command_s_mistake_is_said_without_importing_torch(tmp_path):
    """`verde status` with no chain given took 3.6 s, 2.5 of them importing torch to ask whether
    a model's op had raised (none had run): the suite's CLI tests run dozens of such commands."""
    import subprocess
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("VERDE_")}
    code = ("import sys; from offchain.cli import main; rc = main(['status', '1']); "
            "print(rc, 'torch' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert r.stdout.split()[-2:] == ["2", "False"] and "no chain given" in r.stdout, r.stdout + r.stderr
