def run(event, context):
    return 'custom names'
