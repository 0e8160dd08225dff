"""Kubernetes for the agent and the pool controller: the API client (the only `kubernetes` importer),
its watch, errors, backoff, reachability and the Lease."""
