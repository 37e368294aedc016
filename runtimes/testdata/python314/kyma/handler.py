"""Handlers as Kyma's python314 documentation and upstream's integration
tests write them (main() with Flask's request, the sdk module), one per
path."""

import os
import time

import flask
from flask import request

import sdk

# What the upstream CloudEvent test function remembers of the last event.
last_event = {}


def hello():
    name = flask.request.args.get('name', 'World')
    return f'Hello {name}!'


def check():
    # The Content-Type check of the function specification.
    if request.content_type != 'application/json':
        return flask.Response(response='{"error": "Content-Type must be application/json"}',
                              status=400, mimetype='application/json')
    return '', 202


def greet():
    data = flask.request.get_json(silent=True)
    if not data:
        return 'Bad request', 400
    return 'Hello, ' + data['name']


def ce():
    # Upstream's PythonCloudEvent: a POST with a CloudEvent is remembered, a
    # POST without one is emitted as "send-check", GET tells.
    global last_event
    if request.method == 'POST':
        event = sdk.get_cloud_event()
        if event is None:
            sdk.emit_cloud_event('send-check', os.getenv('CE_SOURCE'), request.get_json())
            return ''
        last_event = {
            'type': event.get_type(), 'source': str(event.get_source()), 'specversion': event.get_specversion(),
            'id': event.get_id(), 'time': event.get_time().isoformat(), 'datacontenttype': event.get_datacontenttype(),
            'data': event.get_data(), 'custom': event.get_extension('customext'),
        }
        return ''
    return last_event


def not_an_event():
    return {'event': repr(sdk.get_cloud_event())}


def emit():
    returned = sdk.emit_cloud_event(request.args.get('type', 'order.created.v1'), 'kfn-test', {'x': 1},
                                    {'eventtypeversion': 'v1'})
    return {'returned': repr(returned)}


def meta():
    return {
        'name': sdk.get_function_name(), 'namespace': sdk.get_namespace(), 'runtime': sdk.get_runtime(),
        'timeout': sdk.get_timeout(), 'limit': sdk.get_body_size_limit(),
    }


def path():
    return os.getenv('FUNCTION_PATH')


def span():
    with sdk.get_tracer().start_as_current_span('work') as s:
        s.set_attribute('kfn.test', True)
    return {'traced': True}


def fail():
    raise RuntimeError('secret detail')


def abort():
    flask.abort(404)


def sleep():
    time.sleep(float(request.args.get('s', '5')))
    return 'slept'


def options():
    return 'method ' + request.method, 200, {'X-Handled-By': 'handler'}


def items():
    return [1, 2, 3]


def stream():
    def chunks():
        yield 'a'
        yield 'b'
    return chunks()


def body():
    return {'length': len(request.get_data()), 'limit': request.max_content_length}


ROUTES = {
    '/hello': hello, '/check': check, '/greet': greet, '/ce': ce, '/not-an-event': not_an_event, '/emit': emit,
    '/meta': meta, '/span': span, '/fail': fail, '/abort': abort, '/sleep': sleep, '/options': options,
    '/items': items, '/path': path, '/stream': stream, '/body': body,
}


def main():
    route = ROUTES.get(request.path)
    if route is None:
        return 'no route ' + request.path, 404
    return route()
