#!/usr/bin/env python3
"""Writes `tick` to stdout every 0.2 s; on SIGTERM prints `bye` and exits 0."""

import signal
import sys
import time


def bye(*_):
    print("bye", flush=True)
    sys.exit(0)


signal.signal(signal.SIGTERM, bye)
while True:
    print("tick", flush=True)
    time.sleep(0.2)
