"""The Kubernetes side of the daemon: the API client (the only `kubernetes` importer) and annotation keys."""
