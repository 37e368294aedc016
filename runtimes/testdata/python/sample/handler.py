import os


def main(event, context):
    return 'Hello ' + os.getenv('PERSON_NAME')
