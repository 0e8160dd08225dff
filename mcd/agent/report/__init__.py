"""What the daemon reports to the cluster: the Node writer, Events and metrics."""
