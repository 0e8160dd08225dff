"""Human-readable renderings of plans and findings (the `-o text` output). Pure: returns strings."""

from __future__ import annotations

from collections.abc import Sequence

from mcd.planner.plan import Plan
from mcd.planner.steps import step_text


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths[:-1]) + "  {}"
    return [fmt.format(*headers).rstrip()] + [fmt.format(*r).rstrip() for r in rows]


def plan_text(p: Plan) -> str:
    """A table: one row per change with its actions and rule, then the combined decision."""
    lines = [f"plan {p.old_name} -> {p.new_name}: {'reconcilable' if p.reconcilable else 'UNRECONCILABLE'}"]
    if not p.reconcilable:
        lines += [f"  error: {e}" for e in p.errors]
        lines.append(f"node state would be Unreconcilable, reason: {p.reason}")
        return "\n".join(lines) + "\n"
    flags = [k for k, v in p.diff.flags().items() if v]
    lines.append(f"changed sections: {', '.join(flags) if flags else 'none'}")
    lines.append(f"mode: {'legacy action table' if p.legacy else 'node disruption policy'}")
    if p.changes:
        rows = [
            (c.kind, c.change, c.name, ", ".join(map(str, c.actions)) or "-", c.rule)
            for c in p.changes
        ]
        lines.append("")
        lines += _table(("KIND", "CHANGE", "NAME", "ACTIONS", "RULE"), rows)
    lines.append("")
    lines.append(f"action: {', '.join(map(str, p.actions))}  ({p.action_rule})")
    lines.append(f"drain:  {'yes' if p.drain else 'no'}  ({p.drain_rule})")
    for w in p.warnings:
        lines.append(f"warning: {w}")
    for n in p.notes:
        lines.append(f"note: {n}")
    for r in p.repairs:
        lines.append(f"repair: {r} (drifted from the applied config)")
    if p.steps:
        lines.append("steps:")
        lines += [f"  {i}. {step_text(s)}" for i, s in enumerate(p.steps, 1)]
    return "\n".join(lines) + "\n"
