# A stand-in for Kyma's python312 runtime, for runtimes/bottle_test.go:
# bottle on cheroot's WSGI server (as Kyma runs it), one route for every
# path and the methods Kyma routes, and main(event, context) called with
# event['extensions']['request'] made as Kyma makes it: a bottle request over
# a copy of the call's environ, its body read into memory. Needs bottle and
# cheroot (Debian: python3-bottle, python3-cheroot). Usage: reference.py PORT
import io
import os
import sys

import bottle
from cheroot import wsgi

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import handler  # noqa: E402

# Kyma sets bottle's body bound to FUNC_MEMFILE_MAX, 100 MiB by default.
bottle.BaseRequest.MEMFILE_MAX = 100 * 1024 * 1024


class CopiedRequest(bottle.BaseRequest):
    """A request over a copy of an environ, its body given as bytes."""

    def __init__(self, body, environ):
        super().__init__(environ)
        self.environ['bottle.request.body'] = io.BytesIO(body)


app = bottle.Bottle()


@app.get('/healthz')
def healthz():
    return 'OK'


@app.get('/_bottle_version')
def version():
    return bottle.__version__


@app.route('/<:re:.*>', method=['GET', 'POST', 'PATCH', 'DELETE'])
def call():
    req = bottle.request
    body = req.body.read()
    event = {'extensions': {'request': CopiedRequest(body, req.environ.copy())}}
    if req.get_header('content-type') == 'application/json':
        event['data'] = req.json
    return handler.main(event, {})


if __name__ == '__main__':
    server = wsgi.Server(('127.0.0.1', int(sys.argv[1])), app)
    server.start()
