# A Kyma handler that uses the libraries Kyma's Python image provides,
# without a requirements.txt of its own.
import bottle
import cloudevents
import prometheus_client
import requests


def main(event, context):
    return {'bottle': bottle.__name__, 'cloudevents': cloudevents.__name__,
            'prometheus_client': prometheus_client.__name__, 'requests': requests.__name__}
