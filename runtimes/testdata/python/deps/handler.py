# Handler using a package installed from a private index (the test's).
import kfn_greet


def main(event, context):
    return kfn_greet.greet('python')
