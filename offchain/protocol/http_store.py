"""A result store over HTTP (docs/PROTOCOL.md §6): the published directory served as plain
content-addressed files (`<url>/<C_T hex>/manifest.json`, `.../state.safetensors`), so a
client on another machine fetches the accepted result. Nothing served is trusted: the
client downloads the entry into a local directory and checks it there exactly as a local
store (delivery.verify: every chunk against its commitment, the commitments against the
accepted claim). Downloads resume where they stopped (HTTP Range); any static file server
(nginx, `python -m http.server` without resume) can serve the same directory."""
from __future__ import annotations

import http.client
import os
import shutil
import sys
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from .delivery import MANIFEST, STATE, DeliveryError, _regular

BLOCK = 1 << 16
TIMEOUT_S = 30


class TransferError(DeliveryError):
    """The server stopped answering or sending: what arrived is kept, a re-run resumes."""


def is_url(store) -> bool:
    return str(store).startswith(("http://", "https://"))


# -- the server ---------------------------------------------------------------------------------
def _handler(root: Path):
    class Handler(BaseHTTPRequestHandler):
        """GET/HEAD of a regular file of the store (one `bytes=N-` or `bytes=N-M` range); no listing."""

        def do_HEAD(self):
            self._serve(body=False)

        def do_GET(self):
            self._serve(body=True)

        def _serve(self, body: bool):
            rel = urllib.request.url2pathname(self.path.split("?", 1)[0]).lstrip("/")
            try:
                if not rel or any(p in ("", ".", "..") for p in Path(rel).parts):
                    raise FileNotFoundError
                path = _regular(root, root / rel)
                size = os.path.getsize(path)
            except (OSError, DeliveryError):
                self.send_error(404, "not in this store")
                return
            first, last = 0, size - 1
            rng = self.headers.get("Range")
            if rng:
                try:
                    unit, _, span = rng.partition("=")
                    a, _, b = span.partition("-")
                    first, last = int(a), min(int(b) if b else size - 1, size - 1)
                    if unit.strip() != "bytes" or first > last:
                        raise ValueError
                except ValueError:
                    self.send_response(416)
                    self.send_header("Content-Range", f"bytes */{size}")
                    self.end_headers()
                    return
            self.send_response(206 if rng else 200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Accept-Ranges", "bytes")
            self.send_header("Content-Length", str(last - first + 1))
            if rng:
                self.send_header("Content-Range", f"bytes {first}-{last}/{size}")
            self.end_headers()
            if not body:
                return
            with open(path, "rb") as f:
                f.seek(first)
                left = last - first + 1
                while left:
                    data = f.read(min(BLOCK, left))
                    if not data:
                        break
                    self.wfile.write(data)
                    left -= len(data)

        def log_message(self, *args):  # an agent's log is for its job, not for each request
            pass
    return Handler


def serve(store: Path, host: str = "127.0.0.1", port: int = 0) -> ThreadingHTTPServer:
    """Serve `store` (created if absent) in a daemon thread. -> the server (its
    server_address says the port; shutdown() stops it)."""
    root = Path(store).resolve()
    root.mkdir(parents=True, exist_ok=True)
    server = ThreadingHTTPServer((host, port), _handler(root))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="verde-store", daemon=True).start()
    return server


def parse_address(value: str) -> tuple[str, int]:
    """HOST:PORT (or :PORT, all interfaces) for --serve."""
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"{value!r} is not HOST:PORT (e.g. 0.0.0.0:8600, or 127.0.0.1:8600 for this machine only)")
    return host or "0.0.0.0", int(port)


# -- the client ---------------------------------------------------------------------------------
def download(url: str, claim: bytes, into: Path, progress: bool = True) -> Path:
    """The store entry of `claim` at `url`, copied into the directory `into` (a local store:
    `into/<claim hex>/...`), each file resumed from what an earlier run left (`*.part`).
    -> `into`, for delivery.verify. TransferError when the server stops mid-way (kept for a
    re-run), DeliveryError when it has no such entry."""
    entry = Path(into) / claim.hex()
    entry.mkdir(parents=True, exist_ok=True)
    for name in (MANIFEST, STATE):
        target = entry / name
        if not target.exists():
            _fetch(f"{url.rstrip('/')}/{claim.hex()}/{name}", target, progress and name == STATE)
    return Path(into)


def discard(into: Path, claim: bytes) -> None:
    """Forget a downloaded entry (it did not verify: a re-run must not trust it)."""
    shutil.rmtree(Path(into) / claim.hex(), ignore_errors=True)


def _fetch(url: str, target: Path, progress: bool) -> None:
    part = target.with_name(target.name + ".part")
    have = part.stat().st_size if part.exists() else 0
    req = urllib.request.Request(url, headers={"Range": f"bytes={have}-"} if have else {})
    try:
        r = urllib.request.urlopen(req, timeout=TIMEOUT_S)
    except urllib.error.HTTPError as e:
        if e.code == 416 and have:  # the part is already whole
            part.replace(target)
            return
        if e.code == 404:
            raise DeliveryError(f"no {target.name} at {url} (HTTP 404): the store does not hold this result") from None
        raise TransferError(f"{url}: HTTP {e.code} {e.reason}") from None
    except (urllib.error.URLError, OSError) as e:
        raise TransferError(f"cannot reach {url}: {getattr(e, 'reason', e)}") from None
    with r:
        if have and r.status != 206:  # the server ignores ranges: start over
            have = 0
        total = have + int(r.headers.get("Content-Length") or 0)
        from tqdm import tqdm
        bar = tqdm(total=total or None, initial=have, unit="B", unit_scale=True, desc=target.name,
                   disable=not (progress and sys.stderr.isatty()))
        try:
            with open(part, "ab" if have else "wb") as f:
                while True:
                    try:
                        data = r.read(BLOCK)
                    except (OSError, http.client.HTTPException) as e:  # a reset, a short read (IncompleteRead)
                        raise TransferError(f"{url}: the transfer stopped after {f.tell():,} of {total:,} bytes "
                                            f"({type(e).__name__}); what arrived is kept in {part}") from None
                    if not data:
                        break
                    f.write(data)
                    bar.update(len(data))
                got = f.tell()
        finally:
            bar.close()
    if total and got != total:
        raise TransferError(f"{url}: the transfer stopped after {got:,} of {total:,} bytes; what arrived is kept "
                            f"in {part}")
    part.replace(target)
