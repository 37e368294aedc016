# A python312 handler that reads event['extensions']['request'] the ways
# Kyma's own material does (written for kfn's tests, after them): its
# integration tests' publisher mock (vars() of the headers and body,
# event.ceHeaders, query.get(key=...), bottle.HTTPResponse), its examples
# (params.get, HTTPResponse with a body), Busola's function template
# (query.get and context), its performance scenario (headers.get) and the
# function specification (headers.get('Content-Type'), HTTPResponse with
# headers). runtimes/bottle_test.go calls it.
import json

from bottle import HTTPResponse

saved = {}


def main(event, context):
    req = event.ceHeaders['extensions']['request']
    route = req.path.strip('/')
    if route == 'mock':
        print('headers:', vars(req.headers))
        print('body:', vars(req.body))
        print('method:', req.method)
        if req.method == 'GET':
            event_type = req.query.get(key='type')
            if event_type is None:
                return json.dumps(saved)
            return json.dumps(saved.get(req.query.get(key='source'), {}).get(event_type, ''))
        if req.method == 'POST':
            attributes = event.ceHeaders
            attributes.pop('extensions')
            saved[str(attributes['ce-source'])] = {attributes['ce-type']: attributes}
            return HTTPResponse(status=201)
        return HTTPResponse(status=405)
    if route == 'describe':
        text = req.params.get('text')
        if not text:
            return HTTPResponse(body='"text" is mandatory', status=400)
        return {'text': text, 'words': len(text.split())}
    if route == 'greet':
        greeting = req.query.get('greeting') or 'Hello world'
        return greeting + ' from the Kyma Function ' + context['function-name'] + ' running on ' + context['runtime'] + '!'
    if route == 'area':
        headers = req.headers
        return {'area': int(str(headers.get('width')).strip()) * int(str(headers.get('height')).strip())}
    if route == 'accept':
        status, payload = 202, {'success': 'Message accepted.'}
        if req.headers.get('Content-Type') not in ['application/json']:
            status, payload = 400, json.dumps({'error': 'Invalid Content-Type.'})
        return HTTPResponse(body=payload, status=status, headers={'Content-Type': 'application/json'})
    return HTTPResponse(status=404)
