# A handler that takes 30 s to load (TestASignalWhileStartingEndsTheHost):
# the host is still starting when the test signals it.
import time

print('kfn-test: loading', flush=True)
time.sleep(30)


def main(event, context):
    return 'loaded'
