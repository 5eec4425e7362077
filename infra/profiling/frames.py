#!/usr/bin/env python3
"""Share of a recording's CPU samples, on the threads whose name matches, whose stack holds each frame.

Usage: jfr print --events jdk.ExecutionSample --stack-depth 80 guard.jfr > samples.txt
       python3 frames.py samples.txt THREAD_REGEX [FRAME_REGEX ...]

A frame regex is searched in each frame's class and method name (org.example.Type.method). With no frame regex,
prints the frames most often on top of the stack (self) and anywhere on it (inclusive).
"""
import collections
import re
import sys


def samples(path, thread):
    text = open(path, encoding="utf-8").read()
    for block in text.split("jdk.ExecutionSample {")[1:]:
        name = re.search(r'sampledThread = "([^"]*)"', block)
        if name and thread.search(name.group(1)):
            yield re.findall(r"^\s+([\w$.<>]+)\(.*?\)\s+line:", block, re.M)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    stacks = list(samples(sys.argv[1], re.compile(sys.argv[2])))
    total = max(len(stacks), 1)
    print(f"{len(stacks)} samples")
    if len(sys.argv) > 3:
        for frame in sys.argv[3:]:
            pattern = re.compile(frame)
            hits = sum(1 for stack in stacks if any(pattern.search(each) for each in stack))
            print(f"{100 * hits / total:5.1f} %  {frame}")
        return
    top = collections.Counter(stack[0] for stack in stacks if stack)
    anywhere = collections.Counter(each for stack in stacks for each in set(stack))
    print("-- on top of the stack")
    for frame, hits in top.most_common(25):
        print(f"{100 * hits / total:5.1f} %  {frame}")
    print("-- anywhere on the stack")
    for frame, hits in anywhere.most_common(60):
        print(f"{100 * hits / total:5.1f} %  {frame}")


if __name__ == "__main__":
    main()
