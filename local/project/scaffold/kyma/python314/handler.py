import sdk


def main():
    return 'Hello World from ' + sdk.get_function_name() + '!'
