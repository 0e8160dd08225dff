"""The update transaction: runs a plan's steps on a node root, records them, rolls back or recovers."""
