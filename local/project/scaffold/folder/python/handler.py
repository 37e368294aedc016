def main(event, context):
    """Called for each HTTP request and each event; returns the response body."""
    import os
    data = event.get("data") or {}
    name = data.get("name", "world") if isinstance(data, dict) else "world"
    print(f"{context['function-name']} got type={event.get('ce-type')} data={data}")
    return {"message": f"{os.environ.get('GREETING', 'Hello')} {name}"}
