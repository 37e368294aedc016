# Contract test function: one route per point of the handler contract.
# The Node.js twin in ../../nodejs/contract/handler.js answers the same way.
import os
import time


def describe(data):
    if data is None:
        return {'kind': 'none', 'data': None}
    if isinstance(data, (bytes, bytearray)):
        return {'kind': 'bytes', 'data': data.decode('utf-8')}
    if isinstance(data, str):
        return {'kind': 'text', 'data': data}
    return {'kind': 'json', 'data': data}


def main(event, context):
    req = event['extensions']['request']
    path = req.path
    if path == '/hello':
        return 'Hello ' + str(os.environ.get('PERSON_NAME'))
    if path == '/echo':
        out = describe(event['data'])
        out['ce'] = {k: v for k, v in event.items() if k.startswith('ce-')}
        out.update(method=req.method, path=req.path, query={'name': req.query.get('name')},
                   context=context, header=req.get_header('X-Test'))
        return out
    if path == '/method':
        return req.method
    if path == '/status':
        event.setResponseStatus(201)
        event.setResponseHeader('X-Custom', 'yes')
        event.setResponseContentType('application/x-kfn')
        return 'created'
    if path == '/none':
        return None
    if path == '/returns':
        # What bottle makes of other return values (Kyma's python312).
        return {'zero': 0, 'false': False, 'emptylist': [], 'strlist': ['a', 'b']}[req.query.v]
    if path == '/object':
        return {'ok': True}
    if path in ('/throw', '/reject'):
        raise RuntimeError('boom')
    if path == '/sleep':
        time.sleep(int(req.query.ms) / 1000)
        return 'slept'
    if path == '/stray-errors':
        # An error in a thread of the handler's own, which the host cannot catch.
        import threading

        def late():
            raise RuntimeError('late boom')
        threading.Thread(target=late).start()
        return 'ok'
    if path == '/bad-header':
        event.setResponseHeader('X-Bad', 'a\r\nInjected: yes')
        return 'not sent'
    if path == '/exit':
        import sys
        sys.exit(3)
    if path == '/meet':
        # Two calls meet only if they run at the same time: each marks its
        # arrival and waits (up to 4 s) for the other's mark.
        folder = os.environ['MARKER_DIR']
        open(os.path.join(folder, req.query.me), 'w').close()
        until = time.monotonic() + 4
        while time.monotonic() < until:
            if os.path.exists(os.path.join(folder, req.query.other)):
                return 'met'
            time.sleep(0.005)
        return 'alone'
    if path == '/hang':
        time.sleep(3600)
        return 'never'
    if path == '/block':
        open(os.path.join(os.environ['MARKER_DIR'], 'started'), 'w').close()
        time.sleep(int(req.query.ms) / 1000)
        return 'finished'
    if path == '/emit':
        try:
            r = event.emitCloudEvent(req.query.type or 'order.created.v1', 'kfn-test', {'x': 1},
                                     {'eventtypeversion': 'v1', 'kfnhops': req.query.kfnhops or None})
            return {'status': r.status_code}
        except Exception as err:
            event.setResponseStatus(502)
            return {'error': str(err)}
    if path == '/tracer':
        span = event.tracer.start_span('work')
        span.set_attribute('k', 'v')
        span.end()
        return 'traced'
    return 'no route ' + path
