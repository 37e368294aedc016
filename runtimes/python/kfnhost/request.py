"""The request and response objects a handler sees in event['extensions']."""

import json

from .httpio import FormsDict, media_type, parse_query


class Request:
    """The HTTP request, shaped like the bottle request Kyma's Python runtime
    passed as event['extensions']['request']."""

    def __init__(self, method, target, version, headers, body, remote_addr):
        self.method = method
        path, _, qs = target.partition('?')
        self.path = path
        self.query_string = qs
        self.version = version
        self.headers = headers
        self._body = body
        self.remote_addr = remote_addr
        self._query = None
        self._json = self
        self._forms = None
        self._cookies = None

    @property
    def fullpath(self):
        return self.path

    @property
    def url(self):
        scheme = self.headers.get('x-forwarded-proto', 'http').split(',')[0].strip()
        host = self.headers.get('x-forwarded-host') or self.headers.get('host', '')
        return '%s://%s%s%s' % (scheme, host, self.path, '?' + self.query_string if self.query_string else '')

    @property
    def query(self):
        if self._query is None:
            self._query = parse_query(self.query_string)
        return self._query

    GET = query

    @property
    def forms(self):
        if self._forms is None:
            if media_type(self.content_type) == 'application/x-www-form-urlencoded' and self._body:
                self._forms = parse_query(self._body.decode('utf-8', 'replace'))
            else:
                self._forms = FormsDict()
        return self._forms

    POST = forms

    @property
    def params(self):
        out = FormsDict()
        for k, v in self.query.allitems():
            out.add(k, v)
        for k, v in self.forms.allitems():
            out.add(k, v)
        return out

    @property
    def body(self):
        """A fresh file-like object over the raw body bytes."""
        import io
        return io.BytesIO(self._body or b'')

    @property
    def data(self):
        """The raw body bytes."""
        return self._body or b''

    @property
    def json(self):
        """The body parsed as JSON for a JSON content type, else None."""
        if self._json is self:
            mt = media_type(self.content_type)
            if self._body and (mt == 'application/json' or mt.endswith('+json')):
                self._json = json.loads(self._body)
            else:
                self._json = None
        return self._json

    @property
    def content_type(self):
        return self.headers.get('content-type', '')

    @property
    def content_length(self):
        return len(self._body) if self._body is not None else 0

    @property
    def cookies(self):
        if self._cookies is None:
            from http.cookies import SimpleCookie
            jar = SimpleCookie()
            try:
                jar.load(self.headers.get('cookie', ''))
            except Exception:
                pass
            self._cookies = FormsDict()
            for name, morsel in jar.items():
                self._cookies.add(name, morsel.value)
        return self._cookies

    def get_cookie(self, name, default=None):
        return self.cookies.getone(name, default)

    def get_header(self, name, default=None):
        return self.headers.get(name, default)

    @property
    def is_xhr(self):
        return self.headers.get('x-requested-with', '').lower() == 'xmlhttprequest'

    @property
    def environ(self):
        """A WSGI-style environ dict for code written against WSGI requests."""
        env = {
            'REQUEST_METHOD': self.method,
            'PATH_INFO': self.path,
            'QUERY_STRING': self.query_string,
            'SERVER_PROTOCOL': self.version,
            'REMOTE_ADDR': self.remote_addr,
            'CONTENT_TYPE': self.headers.get('content-type', ''),
            'CONTENT_LENGTH': str(self.content_length),
        }
        for k, v in self.headers.items():
            env['HTTP_' + k.upper().replace('-', '_')] = v
        return env


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
