"""A stand-in Kubernetes API server for tests, the simulator and demos (never the production path).

It speaks the real REST API over HTTP on loopback for the objects mcd uses, with
kube-apiserver's resourceVersion, conflict, patch, watch and eviction semantics; see
docs/sim-cluster.md.
"""

from mcd_sim.apiserver.errors import ApiError
from mcd_sim.apiserver.faults import Faults
from mcd_sim.apiserver.server import ApiServer, resource_type

__all__ = ["ApiError", "ApiServer", "Faults", "resource_type"]
