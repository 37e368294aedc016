def main(event, context):
    message = 'Hello World from ' + context['function-name'] + ' on ' + context['runtime'] + '!'
    print(message)
    return message
