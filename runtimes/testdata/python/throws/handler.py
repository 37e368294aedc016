# A Kyma handler whose module raises while it loads (a missing setting).
import os

if not os.environ.get('API_KEY'):
    raise RuntimeError('API_KEY is not set')


def main(event, context):
    return 'ok'
