from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m statecharts.demo",
        description="Run the example order chart durably (default) or in memory (--memory).",
    )
    parser.add_argument("--memory", action="store_true", help="in memory, with a full trace")
    parser.add_argument("chart", nargs="?", help="an SCXML file (default: the example order)")
    args = parser.parse_args(argv)
    if args.memory:
        from statecharts.demo import memory

        return memory.run(args.chart or str(memory.EXAMPLE))
    from statecharts.demo import durable

    return durable.main(args.chart)


if __name__ == "__main__":
    sys.exit(main())
