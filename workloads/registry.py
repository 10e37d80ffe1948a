"""Every workload a campaign can run, by name (``RunConfig.workload``)."""
from __future__ import annotations

from . import queue_workload, register_workload
from .workload import Workload

WORKLOADS: dict[str, Workload] = {w.name: w for w in (register_workload.WORKLOAD,
                                                      queue_workload.WORKLOAD)}
