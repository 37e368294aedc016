"""python314's handler contract (the request API): main() takes no argument,
reads the request from Flask's `flask.request` and returns anything a Flask
view may return; it runs in a Flask app as in Kyma's runtime. The host keeps
its own HTTP server (keep-alive, limits, timeouts, draining, metrics) and
hands each call to the app as a WSGI request."""

import io
import os
import sys
from urllib.parse import unquote_to_bytes

# The methods Kyma's python314 routes to the handler, on every path.
METHODS = ('GET', 'POST', 'PUT', 'HEAD', 'OPTIONS', 'DELETE', 'PATCH')
# Where the view leaves an exception of the handler's, for the host to
# count it (Kyma counts every exception main() raises, abort() included).
ERROR_KEY = 'kfn.error'
# Response headers the host writes itself.
HOP_HEADERS = frozenset(('content-length', 'connection', 'transfer-encoding', 'keep-alive'))
# Kyma's python314 answers.
INTERNAL_ERROR = 'Internal Server Error'
TIMEOUT_TEXT = 'Timeout while processing the function'


def import_flask():
    """Import Flask, or raise ImportError saying how to install it."""
    try:
        import flask
    except ImportError as err:
        raise ImportError(
            "python314 runs handlers in Flask, which %s cannot import (%s): install it for this python3 "
            "with 'pip install flask', or on Debian 'apt-get install python3-flask'" % (sys.executable, err),
            name='flask') from err
    return flask


class App:
    """A Flask app whose every route calls the handler."""

    def __init__(self, handler, cfg):
        flask = import_flask()
        app = flask.Flask('function', root_path=cfg.function_dir)
        app.config['MAX_CONTENT_LENGTH'] = cfg.body_limit

        def view(path=''):
            try:
                return handler()
            except BaseException as err:
                flask.request.environ[ERROR_KEY] = err
                raise

        app.add_url_rule('/', 'function', view, methods=METHODS)
        app.add_url_rule('/<path:path>', 'function', view, methods=METHODS)
        app.register_error_handler(500, lambda err: (INTERNAL_ERROR, 500))
        self.app = app
        self.port = str(cfg.port)

    def environ(self, request):
        """The WSGI environ of a request the host has read (body included)."""
        body = request.data
        host = request.headers.get('host', '')
        name = host.rsplit(':', 1)[0] if host and not host.endswith(']') else host
        env = {
            'REQUEST_METHOD': request.method,
            'SCRIPT_NAME': '',
            'PATH_INFO': unquote_to_bytes(request.path).decode('latin-1'),
            'QUERY_STRING': request.query_string,
            'REQUEST_URI': request.path + ('?' + request.query_string if request.query_string else ''),
            'SERVER_NAME': name or 'localhost',
            'SERVER_PORT': self.port,
            'SERVER_PROTOCOL': request.version,
            'REMOTE_ADDR': request.remote_addr,
            'CONTENT_LENGTH': str(len(body)),
            'wsgi.version': (1, 0),
            'wsgi.url_scheme': 'http',
            'wsgi.input': io.BytesIO(body),
            'wsgi.input_terminated': True,
            'wsgi.errors': sys.stderr,
            'wsgi.multithread': True,
            'wsgi.multiprocess': False,
            'wsgi.run_once': False,
        }
        for name, value in request.headers.items():
            if name == 'content-type':
                env['CONTENT_TYPE'] = value
            elif name not in ('content-length', 'transfer-encoding'):
                env['HTTP_' + name.upper().replace('-', '_')] = value
        return env

    def call(self, request):
        """Run the handler for request; returns (status, headers, body,
        length, error): length is the Content-Length of the answer (a HEAD
        answer has no body but the length of the GET's), error what main()
        raised or None."""
        env = self.environ(request)
        started = []

        def start_response(status, headers, exc_info=None):
            started[:] = [status, headers]
            return chunks.append

        chunks = []
        result = self.app(env, start_response)
        try:
            for chunk in result:
                chunks.append(chunk)
        finally:
            close = getattr(result, 'close', None)
            if close is not None:
                close()
        status = int(started[0].split(' ', 1)[0])
        body = b''.join(chunks)
        length = len(body)
        headers = []
        for name, value in started[1]:
            lname = name.lower()
            if lname == 'content-length' and request.method == 'HEAD':
                length = int(value)
            if lname not in HOP_HEADERS:
                headers.append((name, value))
        return status, headers, body, length, env.get(ERROR_KEY)


def api_dir():
    """The directory of the sdk module the host provides to python314
    handlers (import sdk)."""
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'api')
