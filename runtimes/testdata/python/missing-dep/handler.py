# A Kyma handler whose dependency was not declared: loading it fails.
import kfn_test_no_such_package


def main(event, context):
    return kfn_test_no_such_package.now()
