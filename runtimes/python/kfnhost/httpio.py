"""HTTP building blocks: errors, status phrases, dates, header and query maps."""

import time


class HTTPError(Exception):
    """An error answered with its status code and message."""

    def __init__(self, status, message, close=False):
        Exception.__init__(self, message)
        self.status = status
        self.close = close


_reasons = {}


def reason(status):
    phrase = _reasons.get(status)
    if phrase is None:
        from http import HTTPStatus
        try:
            phrase = HTTPStatus(status).phrase
        except ValueError:
            phrase = 'Status %d' % status
        _reasons[status] = phrase
    return phrase


_DAYS = ('Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat', 'Sun')
_MONTHS = ('', 'Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec')
_date = [0, b'']


def http_date():
    now = int(time.time())
    if now != _date[0]:
        t = time.gmtime(now)
        _date[1] = ('%s, %02d %s %d %02d:%02d:%02d GMT' % (
            _DAYS[t.tm_wday], t.tm_mday, _MONTHS[t.tm_mon], t.tm_year, t.tm_hour, t.tm_min, t.tm_sec,
        )).encode()
        _date[0] = now
    return _date[1]


def media_type(content_type):
    if not content_type:
        return ''
    return content_type.split(';', 1)[0].strip().lower()


def _unquote(s):
    if '+' in s:
        s = s.replace('+', ' ')
    if '%' not in s:
        return s
    from urllib.parse import unquote
    return unquote(s)


class Headers(dict):
    """Request headers: a dict with lower-case names, looked up case-insensitively."""

    def __getitem__(self, key):
        return dict.__getitem__(self, key.lower())

    def __contains__(self, key):
        return dict.__contains__(self, key.lower())

    def get(self, key, default=None):
        return dict.get(self, key.lower(), default)

    def getall(self, key):
        value = dict.get(self, key.lower())
        return [] if value is None else [value]


class FormsDict(dict):
    """Query or form values like bottle's FormsDict: the last value of a key by
    item or attribute access ('' when missing), all of them with getall()."""

    def __init__(self):
        dict.__init__(self)
        self._all = {}

    def add(self, key, value):
        self._all.setdefault(key, []).append(value)
        dict.__setitem__(self, key, value)

    def getall(self, key):
        return list(self._all.get(key, ()))

    def getone(self, key, default=None):
        return dict.get(self, key, default)

    def getunicode(self, key, default=None):
        return dict.get(self, key, default)

    def __getattr__(self, name):
        if name.startswith('__'):
            raise AttributeError(name)
        return dict.get(self, name, '')

    def allitems(self):
        return [(k, v) for k, vs in self._all.items() for v in vs]


def parse_query(qs):
    out = FormsDict()
    if qs:
        for part in qs.split('&'):
            if not part:
                continue
            key, _, value = part.partition('=')
            out.add(_unquote(key), _unquote(value))
    return out
