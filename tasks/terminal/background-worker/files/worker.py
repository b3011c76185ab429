#!/usr/bin/env python3
"""Heartbeat worker.

Usage: python3 worker.py --log FILE [--interval SECONDS]

Appends a line `tick N` to FILE every SECONDS (default 1.0) until it receives
SIGTERM or SIGINT, then appends `stopped` and exits.
"""

import argparse
import signal
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--log", required=True)
    ap.add_argument("--interval", type=float, default=1.0)
    args = ap.parse_args()
    running = True

    def stop(*_):
        nonlocal running
        running = False

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    n = 0
    while running:
        n += 1
        with open(args.log, "a") as fh:
            fh.write(f"tick {n}\n")
        time.sleep(args.interval)
    with open(args.log, "a") as fh:
        fh.write("stopped\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
