"""What controllers and the kubelet do around the store, reduced to what drain needs:
PodDisruptionBudget status from the pods it selects, the Eviction subresource, pods on a node
coming up Running and Ready, and terminating pods going once their grace period ends."""

from __future__ import annotations

import heapq
import math
import threading
from collections.abc import Mapping
from typing import Any

from mcd_sim.apiserver import errors
from mcd_sim.apiserver.objectrules import Obj, rfc3339
from mcd_sim.apiserver.resources import ResourceType, lookup
from mcd_sim.apiserver.store import Store, WatchEvent
from mcd_sim.apiserver.tables import parse_time


def _known(rt: ResourceType | None) -> ResourceType:
    assert rt is not None
    return rt


PODS = _known(lookup("", "v1", "pods"))
PDBS = _known(lookup("policy", "v1", "poddisruptionbudgets"))
REPLICASETS = _known(lookup("apps", "v1", "replicasets"))
# kube-apiserver's eviction records the pod in disruptedPods; the disruption controller forgets
# it once the pod is seen terminating, or after this long (its DeletionTimeout)
DISRUPTED_POD_TIMEOUT = 120.0


def selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """A metav1.LabelSelector (matchLabels, matchExpressions); an empty one selects everything."""
    if not selector:
        return True
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        present = key in labels
        if (
            (op == "In" and labels.get(key) not in values)
            or (op == "NotIn" and present and labels.get(key) in values)
            or (op == "Exists" and not present)
            or (op == "DoesNotExist" and present)
        ):
            return False
    return True


def pod_ready(pod: Obj) -> bool:
    if pod["metadata"].get("deletionTimestamp"):
        return False
    status = pod.get("status") or {}
    if status.get("phase") != "Running":
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])


def _scaled(value: Any, total: int, *, round_up: bool) -> int:
    if isinstance(value, str) and value.endswith("%"):
        fraction = int(value[:-1]) * total / 100
        return math.ceil(fraction) if round_up else math.floor(fraction)
    return int(value)


def controller_of(pod: Obj) -> Mapping[str, Any] | None:
    return next((r for r in pod["metadata"].get("ownerReferences") or [] if r.get("controller")), None)


def _expected(spec: Obj, selected: list[Obj], scales: Mapping[str, int]) -> int:
    """The pods a budget expects: with an integer minAvailable the pods there are, otherwise (as
    the disruption controller) the replicas their controllers ask for, so that a pod gone and
    not yet replaced does not lower the floor. A pod whose controller has no known scale (or no
    controller, which kube-apiserver refuses) counts as one."""
    min_available = spec.get("minAvailable")
    if min_available is not None and not (isinstance(min_available, str) and min_available.endswith("%")):
        return len(selected)
    expected, owners = 0, set()
    for pod in selected:
        owner = controller_of(pod)
        uid = (owner or {}).get("uid")
        if uid is None or uid not in scales:
            expected += 1
        elif uid not in owners:
            owners.add(uid)
            expected += scales[uid]
    return expected


def _disrupted(old: Obj, pods: list[Obj], now: float) -> dict[str, str]:
    """`disruptedPods` kept: evicted pods not yet seen terminating, for DISRUPTED_POD_TIMEOUT."""
    live = {p["metadata"]["name"] for p in pods if not p["metadata"].get("deletionTimestamp")}
    return {
        name: stamp
        for name, stamp in (old.get("disruptedPods") or {}).items()
        if name in live and (parse_time(stamp) or now) + DISRUPTED_POD_TIMEOUT > now
    }


def pdb_status(pdb: Obj, pods: list[Obj], now: float, scales: Mapping[str, int] | None = None) -> Obj:
    """`status` of a PDB over the pods of its namespace, as the disruption controller computes it;
    `scales` maps a controller's uid to its replicas."""
    spec = pdb.get("spec") or {}
    selected = [
        p
        for p in pods
        if selector_matches(spec.get("selector"), p["metadata"].get("labels") or {})
        and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
    ]
    old = pdb.get("status") or {}
    disrupted = _disrupted(old, selected, now)
    expected = _expected(spec, selected, scales or {})
    healthy = sum(1 for p in selected if pod_ready(p) and p["metadata"]["name"] not in disrupted)
    if spec.get("minAvailable") is not None:
        desired = _scaled(spec["minAvailable"], expected, round_up=True)
    elif spec.get("maxUnavailable") is not None:
        desired = max(0, expected - _scaled(spec["maxUnavailable"], expected, round_up=True))
    else:
        desired = expected
    allowed = max(0, healthy - desired)
    generation = pdb["metadata"].get("generation", 1)
    condition = {
        "type": "DisruptionAllowed",
        "status": "True" if allowed > 0 else "False",
        "reason": "SufficientPods" if allowed > 0 else "InsufficientPods",
        "message": "",
        "observedGeneration": generation,
        "lastTransitionTime": rfc3339(now),
    }
    for c in old.get("conditions") or []:
        if c.get("type") == "DisruptionAllowed" and c.get("status") == condition["status"]:
            condition["lastTransitionTime"] = c.get("lastTransitionTime", condition["lastTransitionTime"])
    status: Obj = {
        "observedGeneration": generation,
        "disruptionsAllowed": allowed,
        "currentHealthy": healthy,
        "desiredHealthy": desired,
        "expectedPods": expected,
        "conditions": [condition],
    }
    if disrupted:
        status["disruptedPods"] = disrupted
    return status


def running_status(pod: Obj, now: float) -> Obj:
    """The status the kubelet reports once a pod's containers started and passed readiness."""
    stamp = rfc3339(now)
    containers = (pod.get("spec") or {}).get("containers") or []
    return {
        "phase": "Running",
        "conditions": [
            {"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": stamp}
            for t in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")
        ],
        "hostIP": "10.0.0.1",
        "podIP": "10.128.0.10",
        "startTime": stamp,
        "containerStatuses": [
            {
                "name": c.get("name", ""),
                "image": c.get("image", ""),
                "imageID": "",
                "ready": True,
                "started": True,
                "restartCount": 0,
                "state": {"running": {"startedAt": stamp}},
            }
            for c in containers
        ],
    }


class Lifecycle:
    """Hooks into a Store; `start()` runs the kubelet's termination timer thread."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._busy = threading.local()
        self._heap: list[tuple[float, str, str, str]] = []  # (deadline, namespace, name, uid)
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stopping = False
        store.add_hook(self._on_event)

    # --- store hook (runs under the store lock) -----------------------------------------

    def _on_event(self, event: WatchEvent) -> None:
        if getattr(self._busy, "active", False):
            return
        self._busy.active = True
        try:
            if event.key == PODS.key:
                self._on_pod(event)
            if event.key in (PODS.key, PDBS.key, REPLICASETS.key):
                self.refresh_pdbs(event.obj["metadata"].get("namespace", ""))
        finally:
            self._busy.active = False

    def _on_pod(self, event: WatchEvent) -> None:
        pod, meta = event.obj, event.obj["metadata"]
        if (
            event.type == "ADDED"
            and (pod.get("spec") or {}).get("nodeName")
            and not (pod.get("status") or {}).get("phase")
        ):
            self.store.mutate(
                PODS,
                meta["namespace"],
                meta["name"],
                lambda p: {**p, "status": running_status(p, self.store.clock())},
                subresource="status",
            )
        if (
            event.type == "MODIFIED"
            and meta.get("deletionTimestamp")
            and not (event.old or {}).get("metadata", {}).get("deletionTimestamp")
        ):
            deadline = parse_time(meta["deletionTimestamp"]) or self.store.clock()
            with self._cond:
                heapq.heappush(self._heap, (deadline, meta["namespace"], meta["name"], meta["uid"]))
                self._cond.notify()

    def refresh_pdbs(self, namespace: str) -> None:
        pdbs, _ = self.store.select(PDBS, namespace)
        if not pdbs:
            return
        pods, _ = self.store.select(PODS, namespace)
        sets, _ = self.store.select(REPLICASETS, namespace)
        scales = {rs["metadata"]["uid"]: int((rs.get("spec") or {}).get("replicas", 1)) for rs in sets}
        now = self.store.clock()
        for pdb in pdbs:
            status = pdb_status(pdb, pods, now, scales)
            if status != pdb.get("status"):
                self._set_status(pdb["metadata"]["name"], namespace, status)

    def _set_status(self, name: str, namespace: str, status: Obj) -> None:
        self.store.mutate(PDBS, namespace, name, lambda p: {**p, "status": status}, subresource="status")

    # --- eviction ------------------------------------------------------------------------

    def evict(self, namespace: str, name: str, body: Obj) -> Obj:
        """POST pods/NAME/eviction: delete the pod unless a PDB has no disruption left (429)."""
        options = body.get("deleteOptions") or {}
        grace = options.get("gracePeriodSeconds")
        with self.store.lock:
            pod = self.store.get(PODS, namespace, name)
            terminal = (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")
            if not pod["metadata"].get("deletionTimestamp") and not terminal:
                labels = pod["metadata"].get("labels") or {}
                pdbs = [
                    p
                    for p in self.store.select(PDBS, namespace)[0]
                    if selector_matches((p.get("spec") or {}).get("selector"), labels)
                ]
                if len(pdbs) > 1:
                    raise errors.ApiError(
                        500,
                        "InternalError",
                        "This pod has more than one PodDisruptionBudget, which the eviction subresource "
                        "does not support.",
                    )
                if pdbs and self._check_budget(pdbs[0], pod):
                    self._take_disruption(pdbs[0], name)
            uid = (options.get("preconditions") or {}).get("uid")
            self.store.delete(PODS, namespace, name, grace_seconds=grace, precondition_uid=uid)
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}

    def _check_budget(self, pdb: Obj, pod: Obj) -> bool:
        """Raise 429 when the budget has no disruption left; True when the eviction spends one."""
        status = pdb.get("status") or {}
        healthy, desired = int(status.get("currentHealthy", 0)), int(status.get("desiredHealthy", 0))
        if not pod_ready(pod) and healthy >= desired:
            return False  # an unhealthy pod may go while the budget holds (IfHealthyBudget)
        if int(status.get("disruptionsAllowed", 0)) > 0:
            return True
        name = pdb["metadata"]["name"]
        cause = f"The disruption budget {name} needs {desired} healthy pods and has {healthy} currently"
        raise errors.ApiError(
            429,
            "TooManyRequests",
            "Cannot evict pod as it would violate the pod's disruption budget.",
            {"causes": [{"reason": "DisruptionBudget", "message": cause}]},
        )

    def _take_disruption(self, pdb: Obj, pod_name: str) -> None:
        """As kube-apiserver's eviction: one disruption fewer and the pod in disruptedPods, in the
        budget's status before the pod is deleted, so that a second eviction in the same instant
        (or after the pod went and before its replacement is Ready) finds none left."""
        status = dict(pdb.get("status") or {})
        status["disruptionsAllowed"] = int(status.get("disruptionsAllowed", 0)) - 1
        status["disruptedPods"] = {
            **(status.get("disruptedPods") or {}),
            pod_name: rfc3339(self.store.clock()),
        }
        self._set_status(pdb["metadata"]["name"], pdb["metadata"]["namespace"], status)

    # --- the kubelet's termination timer ------------------------------------------------

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="sim-kubelet", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._stopping:
                    now = self.store.clock()
                    if self._heap and self._heap[0][0] <= now:
                        break
                    self._cond.wait(None if not self._heap else self._heap[0][0] - now)
                if self._stopping:
                    return
                _, namespace, name, uid = heapq.heappop(self._heap)
            self.store.finish_termination(PODS, namespace, name, uid)
