"""Anchor: a tuned standard-library ThreadingHTTPServer hello world, measured
beside the kfn host: HTTP/1.1 keep-alive, TCP_NODELAY, no per-request log
line, a large listen backlog."""

import os
import signal
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

BODY = b'hello world'


class Handler(BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'
    disable_nagle_algorithm = True

    def do_GET(self):
        self.send_response(200)
        self.send_header('Content-Type', 'text/plain')
        self.send_header('Content-Length', str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY)

    def log_message(self, *args):
        pass


class Server(ThreadingHTTPServer):
    request_queue_size = 1024
    daemon_threads = True


signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
Server(('', int(os.environ['PORT'])), Handler).serve_forever()
