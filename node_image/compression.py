"""Kafka's record batch codecs: the records section of a batch is compressed as a whole with
the codec named by the batch's attributes (bits 0-2): 1 gzip, 2 snappy, 3 lz4, 4 zstd.

Formats, as Kafka's clients and brokers write them:
- gzip: a gzip stream;
- snappy: snappy-java's stream (the "xerial" framing: a magic header, then blocks each a
  4-byte length and a raw snappy block); a raw snappy block (some clients) is read too;
- lz4: an LZ4 frame with independent blocks;
- zstd: a zstd frame.

Decompression is bounded (``limit`` bytes, default ``MAX_DECOMPRESSED``): a batch that
would decompress to more is refused as corrupt instead of filling the node's memory, and
any bytes a codec cannot read raise ``CodecError`` naming the codec. Native work is done by
cramjam (snappy, lz4) and zstandard (bounded zstd reads); gzip by the standard library.
"""
from __future__ import annotations

import struct
import zlib

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
BY_NAME = {v: k for k, v in NAMES.items()}
MAX_DECOMPRESSED = 64 * 1024 * 1024
XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
XERIAL_BLOCK = 32 * 1024


class CodecError(ValueError):
    """Bytes a codec cannot read, or that decompress past the limit."""


def supported(codec: int) -> bool:
    return codec in NAMES


def decompress(codec: int, data: bytes | memoryview, limit: int = MAX_DECOMPRESSED) -> bytes:
    name = NAMES.get(codec)
    if name is None:
        raise CodecError(f"unknown compression codec {codec}")
    try:
        if codec == GZIP:
            out = _gunzip(bytes(data), limit)
        elif codec == SNAPPY:
            out = _unsnappy(bytes(data), limit)
        elif codec == LZ4:
            import cramjam
            out = bytes(cramjam.lz4.decompress(bytes(data)))
        elif codec == ZSTD:
            out = _unzstd(bytes(data), limit)
        else:
            out = bytes(data)
    except CodecError:
        raise
    except Exception as exc:  # noqa: BLE001 - each library raises its own types for garbage
        raise CodecError(f"cannot decompress {name} records: {exc}") from None
    if len(out) > limit:
        raise CodecError(f"{name} records decompress to more than {limit} bytes")
    return out


def compress(codec: int, data: bytes) -> bytes:
    if codec == GZIP:
        c = zlib.compressobj(6, zlib.DEFLATED, 31)
        return c.compress(data) + c.flush()
    if codec == SNAPPY:
        import cramjam
        out = [XERIAL_HEADER]
        for i in range(0, len(data), XERIAL_BLOCK):
            block = bytes(cramjam.snappy.compress_raw(data[i:i + XERIAL_BLOCK]))
            out += [struct.pack(">i", len(block)), block]
        return b"".join(out)
    if codec == LZ4:
        import cramjam
        c = cramjam.lz4.Compressor(content_checksum=False, block_linked=False)
        c.compress(data)
        return bytes(c.finish())
    if codec == ZSTD:
        import zstandard
        return zstandard.ZstdCompressor(level=3).compress(data)
    if codec == NONE:
        return data
    raise CodecError(f"unknown compression codec {codec}")


def _gunzip(data: bytes, limit: int) -> bytes:
    d = zlib.decompressobj(47)  # gzip or zlib header
    out = d.decompress(data, limit + 1)
    if len(out) <= limit and not d.eof:
        raise CodecError("gzip records end before the gzip stream does")
    return out


def _unsnappy(data: bytes, limit: int) -> bytes:
    import cramjam
    if not data.startswith(XERIAL_MAGIC):
        if cramjam.snappy.decompress_raw_len(data) > limit:
            raise CodecError(f"snappy records decompress to more than {limit} bytes")
        return bytes(cramjam.snappy.decompress_raw(data))
    pos, out, total = len(XERIAL_HEADER), [], 0
    if len(data) < pos:
        raise CodecError("snappy stream header is torn")
    while pos < len(data):
        if pos + 4 > len(data):
            raise CodecError("snappy block length is torn")
        (n,) = struct.unpack_from(">i", data, pos)
        pos += 4
        if n < 0 or pos + n > len(data):
            raise CodecError(f"snappy block of {n} bytes runs past the records")
        block = data[pos:pos + n]
        total += cramjam.snappy.decompress_raw_len(block)
        if total > limit:
            raise CodecError(f"snappy records decompress to more than {limit} bytes")
        out.append(bytes(cramjam.snappy.decompress_raw(block)))
        pos += n
    return b"".join(out)


def _unzstd(data: bytes, limit: int) -> bytes:
    import io

    import zstandard
    with zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data),
                                                     read_across_frames=True) as r:
        out = r.read(limit + 1)
    return out
