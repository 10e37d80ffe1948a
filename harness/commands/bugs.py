"""``chaoskraft bugs``: the planted bugs and where each is caught."""
from __future__ import annotations

import json

from node_image.bugs import BUGS


def cmd_bugs(args) -> int:
    rows = [{"name": b.name, "layer": b.layer, "rule": b.rule, "description": b.description,
             "detected_by": list(b.expected), "workload": b.workload,
             "needs_faults": list(b.needs_faults), "campaign": b.campaign,
             "sim_options": dict(b.sim_options)} for b in BUGS.values()]
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        for r in rows:
            needs = f" (needs {', '.join(r['needs_faults'])}: {r['campaign']})" \
                if r["needs_faults"] else ""
            needs += "".join(f" (simulator: --option {k}={json.dumps(v)})"
                             for k, v in r["sim_options"].items())
            print(f"{r['name']:<24} {r['layer']:<11} {r['workload']:<9} breaks: {r['rule']}{needs}")
    return 0
