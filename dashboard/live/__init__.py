"""The live feed: after-commit notices (publisher), the poller (feed), the WebSocket (consumer)."""
