"""Feature levels (KIP-584): what the node supports, and UpdateFeatures at the controller.

Every node supports the same ranges (``SUPPORTED``, Kafka 4.0's names). ``metadata.version``
is finalized when the quorum's first leader writes its bootstrap record (the level
``chaoskraft.bootstrap.metadata.version`` gives, 21 by default: Kafka 3.9's IBP_3_9_IV0) and
may be raised while the cluster runs; the node behaves the same at every level it supports,
so a level says which records a peer may meet, not what the node does. The other features
stay at level 0: the node has no dynamic quorum (kraft.version 1), no KIP-890 transactions
(transaction.version 2), no KIP-848 groups (group.version 1) and no eligible leader
replicas.

UpdateFeatures follows Kafka's FeatureControlManager: all or nothing (the first refused
update refuses the request), each refusal INVALID_UPDATE_VERSION with Kafka's reason: an
unknown upgrade type, a level below 0 or outside what the node supports, a downgrade asked
as an upgrade or an upgrade asked as a downgrade; metadata.version is never downgraded
(Kafka 4.0 no longer does it either).
"""
from __future__ import annotations

from . import messages as m
from . import metadata_records as mr
from .metadata_image import MetadataImage

METADATA_VERSION = "metadata.version"
MIN_METADATA_VERSION = 7  # Kafka 3.3-IV3, the oldest level Kafka 4.0 still runs
SUPPORTED: dict[str, tuple[int, int]] = {
    METADATA_VERSION: (MIN_METADATA_VERSION, mr.METADATA_VERSION_LEVEL),
    "kraft.version": (0, 0),
    "transaction.version": (0, 0),
    "group.version": (0, 0),
    "eligible.leader.replicas.version": (0, 0),
}
UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3  # Kafka's FeatureUpdate.UpgradeType


def finalized(image: MetadataImage) -> dict[str, int]:
    """The finalized levels a broker reports (ApiVersions): those above 0."""
    return {k: v for k, v in sorted(image.features.items()) if v > 0}


def update_features(image: MetadataImage, updates) -> tuple[list, int, str | None]:
    """(records, error, message) for UpdateFeatures' rows (feature, level, upgrade type)."""
    records = []
    for name, level, kind in updates:
        def refuse(why: str):
            return [], m.INVALID_UPDATE_VERSION, f"Invalid update version {level} for feature " \
                                                 f"{name}. {why}"
        if kind not in (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
            return refuse("The controller does not support the given upgrade type.")
        current = image.features.get(name, 0)
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
        if level != current:
            records.append(mr.FeatureLevelRecord(name, level))
    return records, m.NONE, None
