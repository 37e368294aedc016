import threading


def main(event, context):
    for i in range(20):
        print('line', threading.get_ident(), i, 'x' * 200)
    print('partial without newline', end='')
    return 'ok'
