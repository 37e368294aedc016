# Kyma's tracing test function (tests/serverless/internal/resources/runtimes,
# BasicTracingNodeFunction) in Python, as Kyma's Python runtimes instrument
# it (`requests`): the handler makes an HTTP request of its own to
# TARGET_URL with requests and answers with what it sent. A call with
# X-Own-Traceparent sets that traceparent on its request itself.
import os

import requests


def main(event, context):
    own = event['extensions']['request'].headers.get('X-Own-Traceparent')
    headers = {'traceparent': own} if own else {}
    r = requests.get(os.environ['TARGET_URL'], headers=headers, timeout=10)
    return {'status': r.status_code}
