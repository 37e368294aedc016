# Kyma's tracing test function in python314's words (main() with Flask's
# request): the handler's own request with requests carries the call's
# trace.
import os

import requests


def main():
    r = requests.get(os.environ['TARGET_URL'], timeout=10)
    return {'status': r.status_code}
