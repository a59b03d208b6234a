"""A result store over HTTP (offchain/protocol/http_store.py) with a real server on loopback:
the accepted result arrives bit for bit and is checked as a local store; a store that lies
is refused and its download forgotten; a server that dies mid-transfer leaves what arrived,
and the next run resumes from there (an HTTP range) instead of starting over."""
import threading
from http.server import ThreadingHTTPServer

import pytest
import torch

from offchain.protocol import http_store
from offchain.protocol.delivery import STATE, DeliveryError, publish, verify
from offchain.protocol.jobfile import load
from offchain.trainer import Trainer
from small_job import write_small_job


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    d = tmp_path_factory.mktemp("http")
    job = load(write_small_job(d / "job"))
    t = Trainer(job, d / "t", "t")
    claim = t.train()
    publish(t, d / "published")
    return job, claim, d / "published"


def _bits(state):
    return {k: v.view(torch.int32) if v.dtype == torch.float32 else v for k, v in state.items()}


def test_a_result_served_over_http_arrives_bit_for_bit_and_verifies(published, tmp_path):
    job, claim, store = published
    server = http_store.serve(store)
    try:
        url = "http://127.0.0.1:%d" % server.server_address[1]
        got = verify(job, http_store.download(url, claim, tmp_path / "dl", progress=False), claim)
    finally:
        server.shutdown()
    here = verify(job, store, claim)
    assert all(torch.equal(a, b) for a, b in zip(_bits(got).values(), _bits(here).values())) and got.keys() == here.keys()
    with pytest.raises(DeliveryError, match="HTTP 404"):  # a claim the store does not hold
        server = http_store.serve(store)
        try:
            http_store.download("http://127.0.0.1:%d" % server.server_address[1], b"\x01" * 32, tmp_path / "x")
        finally:
            server.shutdown()


def test_a_store_that_lies_is_refused_and_its_download_forgotten(published, tmp_path):
    import shutil
    job, claim, store = published
    lying = tmp_path / "lying"
    shutil.copytree(store, lying)
    f = lying / claim.hex() / STATE
    raw = bytearray(f.read_bytes())
    raw[-5] ^= 0x40  # one bit of the last tensor's data
    f.write_bytes(bytes(raw))
    server = http_store.serve(lying)
    try:
        into = http_store.download("http://127.0.0.1:%d" % server.server_address[1], claim, tmp_path / "dl", False)
    finally:
        server.shutdown()
    with pytest.raises(DeliveryError, match="does not match its commitment"):
        verify(job, into, claim)
    http_store.discard(into, claim)
    assert not (into / claim.hex()).exists()



def test_a_server_that_dies_mid_transfer_leaves_a_part_and_the_next_run_resumes(published, tmp_path):
    job, claim, store = published
    size = (store / claim.hex() / STATE).stat().st_size
    cut = size // 3
    base = http_store._handler(store.resolve())
    ranges = []

    class Dying(base):
        def _serve(self, body):
            ranges.append(self.headers.get("Range"))
            if self.path.endswith(STATE) and body and not self.headers.get("Range"):
                data = (store / claim.hex() / STATE).read_bytes()
                self.send_response(200)
                self.send_header("Content-Length", str(size))
                self.end_headers()
                self.wfile.write(data[:cut])
                self.wfile.flush()
                self.connection.shutdown(2)  # dies mid-file
                return
            super()._serve(body)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Dying)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = "http://127.0.0.1:%d" % server.server_address[1]
    try:
        with pytest.raises(http_store.TransferError, match=f"stopped after {cut:,} of {size:,} bytes"):
            http_store.download(url, claim, tmp_path / "dl", False)
        part = tmp_path / "dl" / claim.hex() / (STATE + ".part")
        assert part.stat().st_size == cut
        into = http_store.download(url, claim, tmp_path / "dl", False)  # the same call again: resumes
    finally:
        server.shutdown()
    assert ranges[-1] == f"bytes={cut}-", ranges
    verify(job, into, claim)
    assert not part.exists()


@pytest.mark.parametrize("value,ok", [("127.0.0.1:8600", ("127.0.0.1", 8600)), (":8600", ("0.0.0.0", 8600)),
                                      ("8600", None), ("host:99999", None)])
def test_serve_addresses(value, ok):
    if ok:
        assert http_store.parse_address(value) == ok
    else:
        with pytest.raises(ValueError, match="HOST:PORT"):
            http_store.parse_address(value)
