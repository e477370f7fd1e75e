"""A measuring script for tests/bench/test_launch.py: main(["SECONDS", "EVERY"]) writes a
progress line to stderr every EVERY seconds (0: never) for SECONDS seconds, then returns 0."""
import sys
import time


def main(argv: list[str]) -> int:
    seconds, every = float(argv[0]), float(argv[1])
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        time.sleep(every or seconds)
        if every:
            print("\rworking", end="", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
