"""Coverage events of partition changes: what a batch of the controller's records does to
leadership, the ISR and reassignments, named as ``node_image.coverage`` names them."""
from __future__ import annotations

from . import metadata_records as mr
from .metadata_image import MetadataImage


def partition_changes(before: MetadataImage, records: list) -> list[tuple[str, str]]:
    """(coverage event, message) for each partition change among ``records`` against the
    image ``before`` them: leader elections (unclean ones: from outside the ISR and the ELR;
    clean ones from the ELR), a partition left without a leader, ISR shrinks and expansions,
    reassignments begun and ended."""
    names = {t.topic_id: name for name, t in before.topics.items()}
    out = []
    for r in records:
        if not isinstance(r, mr.PartitionChangeRecord) or r.topic_id not in names:
            continue
        name = names[r.topic_id]
        reg = before.partition(name, r.partition_id)
        if reg is None:
            continue
        where = f"{name}-{r.partition_id}"
        if r.leader == mr.NO_LEADER and reg.leader != mr.NO_LEADER:
            out.append(("partition-offline", f"{where}: no leader (ISR {list(reg.isr)})"))
        elif r.leader not in (mr.NO_LEADER, mr.NO_LEADER_CHANGE, reg.leader):
            out.append(("partition-leader-elected", f"{where}: leader n{r.leader}"))
            # a reassignment completed by the AlterPartition that took its last replica into
            # the ISR may hand leadership to that replica: clean (the new ISR holds all)
            completes = reg.reassigning and r.isr is not None and r.replicas is not None \
                and set(r.replicas) <= set(r.isr)
            if r.leader in reg.elr:  # clean: an ELR member holds all below the HW
                out.append(("elr-election", f"{where}: leader n{r.leader} elected from the "
                                            f"eligible leader replicas {list(reg.elr)}"))
            elif r.leader not in reg.isr and not completes:
                out.append(("unclean-election", f"{where}: leader n{r.leader} elected from "
                                                f"outside the ISR {list(reg.isr)}"))
        if r.isr is not None and set(r.isr) != set(reg.isr):
            event = "isr-shrink" if len(r.isr) < len(reg.isr) else "isr-expand"
            out.append((event, f"{where}: ISR {list(reg.isr)} -> {list(r.isr)}"))
        moving = bool(reg.removing if r.removing_replicas is None else r.removing_replicas) or \
            bool(reg.adding if r.adding_replicas is None else r.adding_replicas)
        replicas = list(reg.replicas if r.replicas is None else r.replicas)
        if moving and not reg.reassigning:
            out.append(("reassignment-started", f"{where}: replicas {list(reg.replicas)} -> "
                                                f"{replicas} (reassigning)"))
        elif not moving and (reg.reassigning or r.replicas is not None):
            out.append(("reassignment-completed", f"{where}: replicas {list(reg.replicas)} -> "
                                                  f"{replicas}"))
    return out

