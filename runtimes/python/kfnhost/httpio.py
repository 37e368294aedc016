"""HTTP building blocks: errors, status phrases, dates, the header map."""

import time


class HTTPError(Exception):
    """An error answered with its status code and message. Raised in a
    handler (bottleapi's request raises it, as bottle raises its own
    HTTPError), it is the call's answer: status_code and body."""

    def __init__(self, status, message, close=False):
        Exception.__init__(self, message)
        self.status = status
        self.close = close

    @property
    def status_code(self):
        """The answer's status (bottle's name)."""
        return self.status

    @property
    def body(self):
        """The answer's body: the message."""
        return str(self)


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
