"""Records of the metadata log, framed as Kafka's MetadataRecordSerde frames them.

A record value is ``uvarint frame version (1) | uvarint api key | uvarint
record version | body``. Api keys and names are Kafka's (FeatureLevelRecord
is 12, NoOpRecord 20, ...); chaoskraft's own register service uses key 10000,
outside Kafka's range. Bodies are msgpack maps of the record's fields instead
of Kafka's generated schema bytes: the metadata log is only read by
chaoskraft nodes, and the frame still tells a reader which record and
version it holds.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import msgpack

from .records import CorruptBatchError, read_uvarint, write_uvarint

FRAME_VERSION = 1
METADATA_VERSION_LEVEL = 21  # Kafka 3.9's metadata.version IBP_3_9_IV0


@dataclass(frozen=True, slots=True)
class FeatureLevelRecord:
    name: str
    feature_level: int


@dataclass(frozen=True, slots=True)
class NoOpRecord:
    pass


@dataclass(frozen=True, slots=True)
class RegisterValueRecord:
    """chaoskraft: the register ``key`` now holds ``value``."""
    key: str
    value: int


API_KEYS: dict[type, int] = {FeatureLevelRecord: 12, NoOpRecord: 20, RegisterValueRecord: 10000}
_BY_KEY = {v: k for k, v in API_KEYS.items()}
_FIELDS = {t: tuple(f.name for f in dataclasses.fields(t)) for t in API_KEYS}


def encode(record) -> bytes:
    t = type(record)
    out = bytearray()
    write_uvarint(out, FRAME_VERSION)
    write_uvarint(out, API_KEYS[t])
    write_uvarint(out, 0)
    out += msgpack.packb([getattr(record, f) for f in _FIELDS[t]], use_bin_type=True)
    return bytes(out)


def decode(value: bytes):
    end = len(value)
    frame, pos = read_uvarint(value, 0, end)
    if frame != FRAME_VERSION:
        raise CorruptBatchError(f"metadata record frame version {frame}, expected {FRAME_VERSION}")
    api_key, pos = read_uvarint(value, pos, end)
    _version, pos = read_uvarint(value, pos, end)
    t = _BY_KEY.get(api_key)
    if t is None:
        raise CorruptBatchError(f"unknown metadata record api key {api_key}")
    fields = msgpack.unpackb(value[pos:], raw=False)
    return t(*fields)
