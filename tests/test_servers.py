"""The tests' own HTTP server (tests/servers.py): a passing run prints no traceback."""

from __future__ import annotations

import socket
import struct
import threading
import time
from http.server import BaseHTTPRequestHandler

from servers import TestServer


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def do_GET(self):
        if self.path == "/boom":
            raise ValueError("a bug in a handler")
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")


def _serve():
    httpd = TestServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
    return httpd


def _reset(port: int, request: bytes = b"") -> None:
    """A client that goes away: its connection closed with a reset (SO_LINGER 0), as a cut download is."""
    c = socket.create_connection(("127.0.0.1", port))
    c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    if request:
        c.sendall(request)
        time.sleep(0.05)
    c.close()


def _wait(cond, timeout=5.0):
    end = time.monotonic() + timeout
    while not cond() and time.monotonic() < end:
        time.sleep(0.01)


def test_a_client_that_goes_away_prints_no_traceback(capfd):
    httpd = _serve()
    try:
        port = httpd.server_address[1]
        # a keep-alive client that resets after its answer: the handler's next read meets the reset
        for _ in range(5):
            _reset(port, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        _wait(lambda: httpd.clients_gone >= 1)
        time.sleep(0.1)
        assert httpd.clients_gone >= 1  # the reset reached the server, and was taken as a client gone
        err = capfd.readouterr().err
        assert "Traceback" not in err and "ConnectionResetError" not in err, err
        # a real error in a handler is still printed: only a client gone is silent
        c = socket.create_connection(("127.0.0.1", port))
        c.sendall(b"GET /boom HTTP/1.1\r\nHost: x\r\n\r\n")
        c.settimeout(5)
        try:
            c.recv(100)  # the server closes the connection after the error
        finally:
            c.close()
        seen = []
        _wait(lambda: seen.append(capfd.readouterr().err) or "ValueError: a bug in a handler" in "".join(seen))
        assert "ValueError: a bug in a handler" in "".join(seen)
    finally:
        httpd.shutdown()
        httpd.server_close()
