import os

import flask

import sdk


def main():
    """Called for each HTTP request and each event; flask.request is the request."""
    event = sdk.get_cloud_event()
    data = (event.get_data() if event else flask.request.get_json(silent=True)) or {}
    name = data.get("name", "world") if isinstance(data, dict) else "world"
    print(f"{sdk.get_function_name()} got type={event.get_type() if event else None} data={data}")
    return {"message": f"{os.environ.get('GREETING', 'Hello')} {name}"}
