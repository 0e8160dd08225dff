"""The agent's work queue: the shared one in `mcd.kube.workqueue` (the pool controller uses it too)."""

from mcd.kube.workqueue import RateLimiter, TokenBucket, WorkQueue

__all__ = ["RateLimiter", "TokenBucket", "WorkQueue"]
