def main(event, context)
    return 1
