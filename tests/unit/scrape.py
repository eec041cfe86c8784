"""Reading the metrics the package serves, for the tests of every layer
that check them: an exposition's samples, one HTTP request, a free
port, a wait."""

import socket
import time
import urllib.error
import urllib.request

from prometheus_client import parser


def samples(text):
    """{(name, frozenset(labels)): value} of an exposition."""
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in parser.text_string_to_metric_families(text)
            for s in family.samples}


def value(_text, _metric, **labels):
    found = [v for (n, lb), v in samples(_text).items()
             if n == _metric and all((k, x) in lb for k, x in labels.items())]
    if len(found) != 1:
        raise AssertionError('%d samples %s%r in:\n%s' % (
            len(found), _metric, labels, _text))
    return found[0]


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def get(url, method='GET', timeout=10):
    """(status, headers, body) of one request."""
    req = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers, exc.read()


def wait_until(predicate, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True
