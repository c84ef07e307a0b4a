"""Mail that survives: queued in a table in the request's own transaction, sent by a sender in
the web process (sender.py) with retries and backoff. See queue.py."""
