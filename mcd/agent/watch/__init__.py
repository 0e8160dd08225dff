"""Watchers: they notice changes and enqueue a key into the daemon's one work queue."""
