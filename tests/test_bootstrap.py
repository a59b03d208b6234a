"""The set-up behind both README commands: idempotent, and clear when a tool is missing."""
import os
import shutil
import subprocess
import sys
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]
BASE_PYTHON = getattr(sys, "_base_executable", sys.executable)


def _copy_checkout(tmp: Path) -> Path:
    """The files bootstrap reads, in a scratch root (stamps match the real venv's)."""
    for rel in ("scripts/bootstrap.sh", "scripts/solc.cjs", "requirements.lock", "pyproject.toml",
                "package.json", "package-lock.json"):
        (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, tmp / rel)
    return tmp


def _run(root: Path, env: dict):
    return subprocess.run(["bash", str(root / "scripts" / "bootstrap.sh")], capture_output=True, text=True,
                          env={"HOME": os.environ.get("HOME", "/root"), "VERDE_VENV": str(ROOT / ".venv"),
                               "VERDE_PYTHON": BASE_PYTHON, **env}, timeout=300)


def test_second_run_does_nothing(tmp_path):
    r = _run(ROOT, {"PATH": os.environ["PATH"]})
    assert r.returncode == 0, r.stderr
    assert "Python venv up to date" in r.stderr and "npm packages up to date" in r.stderr
    assert "installing" not in r.stderr


def test_missing_node_names_the_fix(tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for d in ("/usr/bin", "/bin"):
        for p in Path(d).iterdir():
            if p.name not in ("node", "nodejs", "npm", "npx") and not (bindir / p.name).exists():
                (bindir / p.name).symlink_to(p)
    r = _run(ROOT, {"PATH": str(bindir)})
    assert r.returncode == 1
    assert "Node.js not found" in r.stderr and "Fix:" in r.stderr


def test_unreachable_npm_registry_names_the_cause(tmp_path):
    root = _copy_checkout(tmp_path)
    env = {"PATH": os.environ["PATH"], "npm_config_registry": "http://127.0.0.1:9/",
           "npm_config_fetch_retries": "0", "npm_config_cache": str(tmp_path / "npm-cache"),
           "npm_config_prefer_online": "true"}
    r = _run(root, env)
    assert r.returncode == 1, r.stderr
    assert "npm could not reach its registry" in r.stderr
    assert not (root / "node_modules" / ".verde-stamp").exists()  # nothing marked done


def test_uv_is_given_pips_own_indexes(tmp_path):
    """uv installs the lock (~20 s against pip's ~2 min) but reads neither pip's config files
    nor PIP_* variables, where this machine's torch wheel (+cpu) and mirrors are named."""
    body = (ROOT / "scripts" / "bootstrap.sh").read_text()
    func = body[body.index("pip_index_args() {"):]
    func = func[:func.index("\n}\n") + 3]
    conf = tmp_path / "pip.conf"
    conf.write_text("[global]\nindex-url = https://index.invalid/simple\n"
                    "extra-index-url = file:///mirror/a file:///mirror/b\n")
    r = subprocess.run(["bash", "-c", func + "pip_index_args"], capture_output=True, text=True,
                       env={**os.environ, "VENV": str(ROOT / ".venv"), "PIP_CONFIG_FILE": str(conf),
                            "PIP_FIND_LINKS": "/wheels/here"})
    assert r.returncode == 0, r.stderr
    args = r.stdout.split("\n")
    assert {"--index-url=https://index.invalid/simple", "--extra-index-url=file:///mirror/a",
            "--extra-index-url=file:///mirror/b", "--find-links=/wheels/here"} <= set(args), args
    assert "--index-url=file:///mirror/a file:///mirror/b" not in args  # extra-index-url is not index-url
    assert len(args) == len(set(args))


def test_a_disk_too_full_is_said_before_anything_installs(tmp_path):
    root = _copy_checkout(tmp_path)
    r = _run(root, {"PATH": os.environ["PATH"], "VERDE_MIN_FREE_GB": str(10**6)})
    assert r.returncode == 1
    assert "MB free on the disk of" in r.stderr and "Fix: free some space" in r.stderr, r.stderr
    assert not (root / "node_modules").exists()
