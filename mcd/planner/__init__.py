"""The planner: what an update changes, whether it applies in place, its action and steps. Pure: no I/O."""
