def main(event, context):
    return 'hello world'
