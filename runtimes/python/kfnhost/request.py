"""The request the host read, and the response a python312 handler may set
(event['extensions']['response'])."""


class Request:
    """An HTTP request as the host read it: the request line, the headers
    (a Headers dict, names lower-case, repeated ones joined with ', '), the
    body (bytes, or None without one) and the client's address. Handlers
    see it through bottleapi.Request (python312) or Flask (python314)."""

    __slots__ = ('method', 'target', 'path', 'query_string', 'version', 'headers', '_body',
                 'remote_addr', 'remote_port')

    def __init__(self, method, target, version, headers, body, remote_addr, remote_port=None):
        self.method = method
        self.target = target
        path, _, qs = target.partition('?')
        self.path = path
        self.query_string = qs
        self.version = version
        self.headers = headers
        self._body = body
        self.remote_addr = remote_addr
        self.remote_port = remote_port

    @property
    def data(self):
        """The raw body bytes."""
        return self._body or b''

    @property
    def content_type(self):
        """The Content-Type header, '' without one."""
        return self.headers.get('content-type', '')


class Response:
    """What the handler can set besides its return value:
    event['extensions']['response'].status / .set_header() / .content_type."""

    def __init__(self):
        self.status = 200
        self.headers = []

    @property
    def status_code(self):
        return self.status

    def set_header(self, name, value):
        lname = name.lower()
        self.headers = [h for h in self.headers if h[0].lower() != lname]
        self.headers.append((name, str(value)))

    def add_header(self, name, value):
        self.headers.append((name, str(value)))

    def get_header(self, name, default=None):
        lname = name.lower()
        for k, v in reversed(self.headers):
            if k.lower() == lname:
                return v
        return default

    @property
    def content_type(self):
        return self.get_header('Content-Type')

    @content_type.setter
    def content_type(self, value):
        self.set_header('Content-Type', value)
