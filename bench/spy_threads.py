"""Where a process's CPU went, from a py-spy raw profile: per thread and per function
(inclusive), in cores.

    python bench/spy_threads.py out/spy2.txt --rate 50 --seconds 25 [--top 40]

The profile as bench/gpu_workers.sh records it (`py-spy record --nonblocking --threads -r 50
-d 25 -f raw`). A thread waiting for a busy core counts as active (testkit/pyspy.py)."""

from __future__ import annotations

import argparse
from pathlib import Path

from testkit.pyspy import cores, read_raw


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("profile", type=Path)
    parser.add_argument("--rate", type=float, default=50.0, help="py-spy's -r, samples/s")
    parser.add_argument("--seconds", type=float, default=25.0, help="py-spy's -d")
    parser.add_argument("--top", type=int, default=40, help="functions listed")
    args = parser.parse_args()
    with args.profile.open() as lines:
        profile = read_raw(lines)
    print(f"| thread | cores (of {cores(profile.samples, args.rate, args.seconds):.2f}"
          " active) |\n| --- | --- |")
    for name, count in profile.threads.most_common():
        print(f"| {name} | {cores(count, args.rate, args.seconds):.2f} |")
    print("\n| function (inclusive) | cores |\n| --- | --- |")
    for name, count in profile.functions.most_common(args.top):
        print(f"| {name} | {cores(count, args.rate, args.seconds):.2f} |")


if __name__ == "__main__":
    main()
