"""Feature levels (KIP-584): what the node supports, and UpdateFeatures at the controller.

Every node supports the same ranges (``SUPPORTED``, Kafka 4.0's names). ``metadata.version``
is finalized when the quorum's first leader writes its bootstrap record (the level
``chaoskraft.bootstrap.metadata.version`` gives, 21 by default: Kafka 3.9's IBP_3_9_IV0) and
may be raised while the cluster runs; the node behaves the same at every level it supports,
so a level says which records a peer may meet, not what the node does.
``eligible.leader.replicas.version`` 1 turns on eligible leader replicas (KIP-966; see
``replication_control``), at bootstrap (``chaoskraft.bootstrap.eligible.leader.replicas.version``)
or later; turning it on also writes the cluster's min.insync.replicas as a cluster-level
config record (as Kafka's controller does), turning it off clears every partition's ELR and
gives an empty ISR its first eligible leader replica back. Kafka ties level 1 to
metadata.version 4.0-IV1; here it is accepted at every metadata.version. ``kraft.version``
is the Raft log's, not the metadata's: chosen when a node is formatted (KIP-853's dynamic
quorum) or raised from 0 to 1 here (as in Kafka, only at metadata.version 3.9-IV0, 21, or
in a request that raises it there), which the quorum leader does in its log
(``raft/reconfig.py``'s ``upgrade_kraft_version``) once every other update of the request
is valid; no FeatureLevelRecord is written for it. The other features stay at level 0:
there are no KIP-890 transactions (transaction.version 2); KIP-848's consumer groups are
answered whatever group.version says (Kafka 4.0 answers them from level 1).

UpdateFeatures follows Kafka's FeatureControlManager: all or nothing (the first refused
update refuses the request), each refusal INVALID_UPDATE_VERSION with Kafka's reason: an
unknown upgrade type, a level below 0 or outside what the node supports, a downgrade asked
as an upgrade or an upgrade asked as a downgrade; metadata.version is never downgraded
(Kafka 4.0 no longer does it either).
"""
from __future__ import annotations

from . import messages as m
from . import metadata_records as mr
from . import replication_control as rc
from .metadata_image import CLUSTER, ELR_FEATURE, MetadataImage

METADATA_VERSION = "metadata.version"
KRAFT_VERSION = "kraft.version"
MIN_METADATA_VERSION = 7  # Kafka 3.3-IV3, the oldest level Kafka 4.0 still runs
SUPPORTED: dict[str, tuple[int, int]] = {
    METADATA_VERSION: (MIN_METADATA_VERSION, mr.METADATA_VERSION_LEVEL),
    KRAFT_VERSION: (0, 1),
    "transaction.version": (0, 0),
    "group.version": (0, 0),
    ELR_FEATURE: (0, 1),
}
UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3  # Kafka's FeatureUpdate.UpgradeType
KRAFT_1_NEEDS = 21  # kraft.version 1 depends on metadata.version 3.9-IV0, as in Kafka


def finalized(image: MetadataImage, kraft_level: int = 0) -> dict[str, int]:
    """The finalized levels a broker reports (ApiVersions): those above 0, kraft.version
    (``kraft_level``) from the Raft log."""
    levels = {**image.features, KRAFT_VERSION: kraft_level}
    return {k: v for k, v in sorted(levels.items()) if v > 0}


def bootstrap_records(image: MetadataImage, options) -> list:
    """What the quorum's first leader writes (a ControllerOptions gives the levels)."""
    records = [mr.FeatureLevelRecord(METADATA_VERSION, options.bootstrap_metadata_version)]
    if options.bootstrap_elr_version:
        records += [mr.FeatureLevelRecord(ELR_FEATURE, options.bootstrap_elr_version)]
    return records + elr_records(image, options.bootstrap_elr_version,
                                 options.min_insync_replicas)


def elr_records(image: MetadataImage, level: int, min_isr: int) -> list:
    """What turning eligible leader replicas on (``level`` 1) or off (0) also writes."""
    if level >= 1 and not image.elr_enabled:
        if "min.insync.replicas" in image.configs.get(CLUSTER, {}):
            return []
        return [mr.ConfigRecord(CLUSTER[0], CLUSTER[1], "min.insync.replicas", str(min_isr))]
    if level == 0 and image.elr_enabled:
        return rc.clear_elr(image)
    return []


def update_features(image: MetadataImage, updates, min_isr: int = 1, kraft_level: int = 0,
                    raise_kraft=None, bugs=()) -> tuple[list, int, str | None]:
    """(records, error, message) for UpdateFeatures' rows (feature, level, upgrade type);
    ``min_isr``: the controller's min.insync.replicas, the cluster's once ELR is on;
    ``kraft_level``: the Raft log's kraft.version, ``raise_kraft(level)`` raises it there
    ((error, message)), once every other row is valid. ``bugs``: the planted
    ``upgrade-elects-outside-isr`` hands every partition's leadership to a replica
    outside its ISR, with a raise of metadata.version."""
    records = []
    raft_level = None
    mv = next((level for name, level, _ in updates if name == METADATA_VERSION),
              image.features.get(METADATA_VERSION, 0))
    for name, level, kind in updates:
        def refuse(why: str):
            return [], m.INVALID_UPDATE_VERSION, f"Invalid update version {level} for feature " \
                                                 f"{name}. {why}"
        if kind not in (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
            return refuse("The controller does not support the given upgrade type.")
        current = kraft_level if name == KRAFT_VERSION else image.features.get(name, 0)
        if level < 0:
            return refuse("A feature version cannot be less than 0.")
        lo, hi = SUPPORTED.get(name, (0, 0))
        if name not in SUPPORTED and level > 0:
            return refuse(f"The controller does not support the feature {name}.")
        if not lo <= level <= hi and not (level == 0 and name != METADATA_VERSION):
            return refuse(f"The controller only supports versions {lo}-{hi}.")
        if level < current and kind == UPGRADE:
            return refuse("Can't downgrade the version of this feature without setting the "
                          "upgrade type to either safe or unsafe downgrade.")
        if level > current and kind != UPGRADE:
            return refuse("Can't downgrade to a newer version.")
        if name == METADATA_VERSION and level < current:
            return refuse("metadata.version downgrades are not supported.")
        if name == KRAFT_VERSION and level > current and mv < KRAFT_1_NEEDS:
            return refuse(f"Feature kraft.version={level} depends on metadata.version "
                          f"{KRAFT_1_NEEDS} (3.9-IV0), not {mv}.")
        if name == KRAFT_VERSION:
            raft_level = level if level != current else None
        elif level != current:
            records.append(mr.FeatureLevelRecord(name, level))
            if name == ELR_FEATURE:
                records += elr_records(image, level, min_isr)
    if raft_level is not None:
        if raise_kraft is None:
            return [], m.INVALID_UPDATE_VERSION, "kraft.version is not changed here"
        error, message = raise_kraft(raft_level)
        if error != m.NONE:
            return [], error, message
    if "upgrade-elects-outside-isr" in bugs and any(
            isinstance(r, mr.FeatureLevelRecord) and r.name == METADATA_VERSION for r in records):
        records += _outside_isr_leads(image)
    return records, m.NONE, None


def _outside_isr_leads(image: MetadataImage) -> list:
    """The planted bug's records: a replica outside the ISR, fenced or not, made the leader
    (and taken into the ISR) of every partition that has one."""
    out = []
    for name, pid, reg in rc.iter_partitions(image):
        outside = [b for b in reg.replicas if b not in reg.isr]
        if outside and reg.leader != outside[0]:
            out.append(mr.PartitionChangeRecord(pid, image.topics[name].topic_id,
                                                (outside[0],) + tuple(reg.isr), outside[0]))
    return out
