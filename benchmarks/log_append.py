"""Log append and read throughput for pre-encoded batches of 1,000 records.

This is the broker's hot path: a produce request hands the log a batch already encoded by the producer, and a
fetch hands batches back. Neither should touch individual records, so throughput in records per second
should be far above what per-record Python code could reach.

    python benchmarks/log_append.py [--batches N] [--segment-bytes B]
"""

from __future__ import annotations

import argparse
import time
import tracemalloc

from arguments import at_least

from kafkalite.common.records import Record, RecordBatch
from kafkalite.log import Log, LogConfig

RECORDS_PER_BATCH = 1000
VALUE_BYTES = 100
DISTINCT_BATCHES = 16


def build_batches() -> list[RecordBatch]:
    """A few distinct batches, encoded once, reused round-robin as a producer's stream would look."""
    batches = []
    for b in range(DISTINCT_BATCHES):
        records = [Record(key=f"key-{i}".encode(), value=bytes([b]) * VALUE_BYTES, timestamp=1_700_000_000_000 + i)
                   for i in range(RECORDS_PER_BATCH)]
        batches.append(RecordBatch.from_records(records, producer_id=1, producer_epoch=0, base_sequence=0))
    return batches


def run(batches: list[RecordBatch], batch_count: int, segment_bytes: int, fetch_bytes: int) -> dict[str, float]:
    clock = iter(range(10**12)).__next__
    log = Log(LogConfig(segment_bytes=segment_bytes, retention_ms=-1), clock_ms=clock)
    tracemalloc.start()

    started = time.perf_counter()
    for i in range(batch_count):
        log.append_as_leader(batches[i % DISTINCT_BATCHES], leader_epoch=1)
    append_seconds = time.perf_counter() - started

    started = time.perf_counter()
    offset = log.log_start_offset
    records_read = 0
    end = log.log_end_offset
    while offset < end:
        fetched = log.read(offset, fetch_bytes, max_offset=end)
        records_read += sum(batch.record_count for batch in fetched)
        offset = fetched[-1].next_offset
    read_seconds = time.perf_counter() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()

    records = batch_count * RECORDS_PER_BATCH
    assert records_read == records == log.log_end_offset
    return {
        "records": records,
        "segments": len(log.segments),
        "append_rps": records / append_seconds,
        "read_rps": records_read / read_seconds,
        "log_mib": log.size_in_bytes / 2**20,
        "peak_mib": peak / 2**20,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batches", type=at_least(1), default=100_000, help="batches of 1,000 records to append")
    parser.add_argument("--segment-bytes", type=at_least(1), default=1 << 30,
                        help="log.segment.bytes (at least a batch's size)")
    parser.add_argument("--fetch-bytes", type=at_least(1), default=1 << 20,
                        help="max bytes per read (fetch.max.bytes)")
    args = parser.parse_args()
    batches = build_batches()
    largest = max(batch.size_in_bytes for batch in batches)
    if args.segment_bytes < largest:
        parser.error(f"argument --segment-bytes: must hold a batch of {largest:,} bytes, got {args.segment_bytes:,}")
    result = run(batches, args.batches, args.segment_bytes, args.fetch_bytes)
    print(f"{'records':>12} {'segments':>9} {'append rec/s':>14} {'read rec/s':>14} {'log MiB*':>9} "
          f"{'peak MiB':>9}")
    print(f"{result['records']:>12,} {result['segments']:>9} {result['append_rps']:>14,.0f} "
          f"{result['read_rps']:>14,.0f} {result['log_mib']:>9.1f} {result['peak_mib']:>9.1f}")
    print(f"* logical size; the {DISTINCT_BATCHES} distinct payloads are shared by reference, as a leader shares a "
          "producer's payload, so peak memory is the log's own bookkeeping")


if __name__ == "__main__":
    main()
