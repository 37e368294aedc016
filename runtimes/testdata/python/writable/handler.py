# A Kyma handler that writes files next to itself: through FUNCTION_PATH,
# __file__ and a relative path (the working directory is the function's).
import json
import os


def main(event, context):
    path = os.environ['FUNCTION_PATH']
    with open(os.path.join(path, 'cache.json'), 'w') as f:
        json.dump(event['data'], f)
    with open('relative.txt', 'w') as f:
        f.write('written')
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, 'cache.json')) as f:
        cached = json.load(f)
    with open(os.path.join(here, 'relative.txt')) as f:
        relative = f.read()
    return {'functionPath': path, 'dir': here, 'cwd': os.getcwd(), 'cached': cached, 'relative': relative}
