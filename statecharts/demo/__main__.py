from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m statecharts.demo",
        description=(
            "The demo site (default): example charts, the admin, the API and a timer worker. "
            "--walkthrough runs the example order durably in the terminal; --memory runs it "
            "in memory with the interpreter's trace."
        ),
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--walkthrough", action="store_true", help="durable, in the terminal")
    mode.add_argument("--memory", action="store_true", help="in memory, with a full trace")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("chart", nargs="?", help="an SCXML file for --walkthrough/--memory")
    args = parser.parse_args(argv)
    if args.memory:
        from statecharts.demo import memory

        return memory.run(args.chart or str(memory.EXAMPLE))
    if args.walkthrough:
        from statecharts.demo import durable

        return durable.main(args.chart)
    if args.chart:
        parser.error("a chart file is only used with --walkthrough or --memory")
    from statecharts.demo import site

    return site.main(args.host, args.port)


if __name__ == "__main__":
    sys.exit(main())
