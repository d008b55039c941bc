"""EmbeddedCluster start-to-ready and close times (real clock, a fresh thread and Trio loop each run).

    python benchmarks/embedded.py [--runs 20]

Start: from `EmbeddedCluster(brokers=3).start()` until it returns with a controller elected and every broker
registered and listening. Close: until the thread is joined and every socket is closed. Target: median under
50 ms each.
"""

from __future__ import annotations

import argparse
import statistics
import time

from arguments import at_least

from kafkalite.embedded import EmbeddedCluster


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=at_least(1), default=20)
    args = parser.parse_args()
    EmbeddedCluster(brokers=3).start().close()  # warm-up: imports are not start-up
    starts, closes = [], []
    for _ in range(args.runs):
        began = time.perf_counter()
        cluster = EmbeddedCluster(brokers=3).start()
        started = time.perf_counter()
        cluster.close()
        closed = time.perf_counter()
        starts.append(started - began)
        closes.append(closed - started)
    print(f"{'EmbeddedCluster(brokers=3)':<28} {'median ms':>10} {'p90 ms':>10}")
    for label, values in (("start to ready", starts), ("close", closes)):
        ordered = sorted(values)
        print(f"{label:<28} {1000 * statistics.median(ordered):>10.2f} "
              f"{1000 * ordered[int(0.9 * (len(ordered) - 1))]:>10.2f}")


if __name__ == "__main__":
    main()
