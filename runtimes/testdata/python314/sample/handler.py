import os


def main():
    return 'Hello ' + os.getenv('PERSON_NAME')
