"""The HTTP server the tests start on 127.0.0.1.

A client that gives up (a timeout test, a download cut short, a keep-alive connection the client
drops) resets its connection; socketserver then prints the ConnectionResetError's traceback from
the server's thread, which reads as a failure in a passing run.  This server stays silent for a
client that went away and counts it; any other error in a handler is still printed."""

from __future__ import annotations

from http.server import ThreadingHTTPServer

GONE = (ConnectionResetError, BrokenPipeError, ConnectionAbortedError)


class TestServer(ThreadingHTTPServer):
    __test__ = False  # not a test class, whatever pytest's name rule says
    daemon_threads = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.clients_gone = 0

    def handle_error(self, request, client_address):
        import sys

        if isinstance(sys.exc_info()[1], GONE):
            self.clients_gone += 1
            return
        super().handle_error(request, client_address)
