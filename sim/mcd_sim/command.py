"""`mcd-sim simulate`'s command line: one node's update narrated (`mcd_sim.simulate`), or with
`--nodes N` a pool's rollout (`mcd_sim.fleet`). Here rather than in `mcd.cli` so the node's
package carries none of the simulator's options handling."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mcd.config.findings import Finding, InputError
from mcd_sim.fleet import FleetOptions, simulate_fleet
from mcd_sim.room import fleet_room
from mcd_sim.simulate import SimulateError, SimulateOptions, simulate


def simulate_command(args: Any) -> int:
    workdir = Path(args.workdir) if args.workdir else None
    if args.nodes is not None:
        return _fleet(args, workdir)
    given = (
        ("--max-unavailable", args.max_unavailable),
        ("--pdb", args.pdb),
        ("--replicas", args.replicas),
        ("--picture", args.picture),
        ("--pool", args.pool),
    )
    fleet_only = [flag for flag, value in given if value is not None]
    if fleet_only or args.output != "text":
        raise InputError(fleet_only[0] if fleet_only else "--output", [Finding((), "needs --nodes N")])
    new = Path(args.new or "examples/new.yaml")
    return simulate(SimulateOptions(workdir, Path(args.old), new, args.node, args.timeout or 60.0))


def _fleet(args: Any, workdir: Path | None) -> int:
    if not 0 <= args.kill_controller_after < args.nodes:
        message = f"expected a number of nodes from 0 to {args.nodes - 1} (fewer than --nodes)"
        raise InputError("--kill-controller-after", [Finding((), message)])
    if args.pool is not None and len(args.pool) < 2:
        raise InputError("--pool", [Finding((), "expected the pool's name and files or directories")])
    short = fleet_room(args.nodes)
    if short is not None:
        raise SimulateError(short)
    options = FleetOptions(
        workdir=workdir,
        old=Path(args.old),
        new=Path(args.new or "examples/reboot.yaml"),
        nodes=args.nodes,
        max_unavailable=1 if args.max_unavailable is None else args.max_unavailable,
        timeout=args.timeout or 120.0 + 10.0 * args.nodes,
        output=args.output,
        picture=Path(args.picture) if args.picture else None,
        pdb=args.pdb,
        replicas=args.replicas,
        pod_start=args.pod_start,
        reboot_seconds=args.reboot_seconds,
        pool=args.pool[0] if args.pool else "worker",
        admin=tuple(args.pool[1:]) if args.pool else (),
        controller=args.controller,
        kill_controller_after=args.kill_controller_after,
    )
    return simulate_fleet(options)
