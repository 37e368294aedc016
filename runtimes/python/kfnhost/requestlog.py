"""The request log Kyma's Python runtimes write when asked to
(KYMA_INTERNAL_LOGGER_ENABLED for python312, SERVER_INTERNAL_LOGGER for
python314): one line per request on stdout, in Apache's combined format with
the response time, as wsgi-request-logger's ApacheFormatter writes it."""

import sys
import time

from .bottleapi import path_info

_MONTHS = ('Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec')


class Entry:
    """What the line of one request says, from its request line and
    headers; write() completes it with the answer."""

    __slots__ = ('remote', 'method', 'target', 'version', 'referer', 'agent', 'start', 'utf8_path')

    def __init__(self, remote, method, target, version, headers, utf8_path):
        self.remote = remote
        self.method = method
        self.target = target
        self.version = version
        self.referer = headers.get('referer', '')
        self.agent = headers.get('user-agent', '')
        self.start = time.perf_counter()
        # python312's server (bottle) logs the path decoded as UTF-8,
        # python314's (gevent) as one character per byte.
        self.utf8_path = utf8_path

    def write(self, status, size):
        """Write the line of the request answered status with a body of
        size bytes."""
        micros = int((time.perf_counter() - self.start) * 10 ** 6)
        path, _, query = self.target.partition('?')
        decoded, raw = path_info(path)
        now = time.localtime()
        stamp = time.strftime('%d/{}/%Y:%H:%M:%S %z', now).format(_MONTHS[now.tm_mon - 1])
        request = '%s %s%s%s %s' % (self.method, decoded if self.utf8_path else raw, '?' if query else '', query, self.version)
        sys.stdout.write('%s - - [%s] "%s" %d %d "%s" "%s" %d/%d\n' % (
            self.remote, stamp, request, status, size, self.referer, self.agent, micros // 10 ** 6, micros))
