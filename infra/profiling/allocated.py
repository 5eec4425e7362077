#!/usr/bin/env python3
"""Bytes a recording's threads allocated per message, from jdk.ThreadAllocationStatistics.

Usage: python3 allocated.py guard.jfr MESSAGES THREAD_REGEX [THREAD_REGEX ...]

For each regex, the bytes allocated by the threads whose name matches (their last reading), divided by MESSAGES:
the messages those threads handled (bench-pipeline: the warm-up's 5,000, the throughput run's --messages, and the
paced events of the latency run, --rate times --seconds).
"""
import collections
import json
import re
import subprocess
import sys


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    printed = subprocess.run(
        ["jfr", "print", "--json", "--events", "jdk.ThreadAllocationStatistics", sys.argv[1]],
        capture_output=True, text=True, check=True).stdout
    allocated = collections.defaultdict(int)
    for event in json.loads(printed)["recording"]["events"]:
        values = event["values"]
        name = (values.get("thread") or {}).get("javaName") or ""
        allocated[name] = max(allocated[name], values["allocated"])
    messages = int(sys.argv[2])
    for thread in sys.argv[3:]:
        pattern = re.compile(thread)
        total = sum(bytes_ for name, bytes_ in allocated.items() if pattern.search(name))
        print(f"{total / messages / 1024:8.1f} KiB per message  {thread}")


if __name__ == "__main__":
    main()
