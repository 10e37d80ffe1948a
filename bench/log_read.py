"""What a consumer fetch from offset 0 costs the leader: ``UnifiedLog.read_range`` over 1 MB
of one-record batches (what producers with linger 0 write), against reading the same
batches one file read at a time (how it read before)."""
from __future__ import annotations

import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from node_image import records  # noqa: E402
from node_image.fs import RealFileSystem  # noqa: E402
from node_image.log import UnifiedLog  # noqa: E402

BATCHES = 20_000


def main() -> None:
    fs = RealFileSystem()
    with tempfile.TemporaryDirectory() as d:
        log = UnifiedLog(fs, os.path.join(d, "log"), 1 << 30)
        for i in range(BATCHES):
            log.append(records.build_batch(i, 1, [(None, str(i).encode())], i))
        log.flush()
        entries = log.batch_entries(0, log.end_offset)

        def one_by_one(max_bytes: int) -> bytes:
            out = bytearray()  # as the old read_range did
            for e in entries:
                if out and len(out) + e.size > max_bytes:
                    break
                out += log.read_entry(e)
            return bytes(out)

        for name, read in (("one read per batch", one_by_one),
                           ("one read per segment", lambda n: log.read_range(0, n, log.end_offset))):
            start = time.perf_counter()
            runs = 0
            while time.perf_counter() - start < 2.0:
                data = read(1 << 20)
                runs += 1
            ms = (time.perf_counter() - start) / runs * 1000
            print(f"{name:<22} {len(data):>9} bytes per 1 MB fetch: {ms:8.2f} ms")
    fs.close()


if __name__ == "__main__":
    main()
