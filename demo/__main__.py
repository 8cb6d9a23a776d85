from __future__ import annotations

import argparse
import os
import sys

DEBUG_BANNER = """\
******************************************************************************
 DEBUG is on: this is the demo (DJANGO_DEBUG=1). Django's error pages show the
 settings and the environment to anyone who can reach the site, and the secret
 key is a public one: never expose the demo to a network. To run the site on a
 server, use demo.settings.production (docs/deployment.md).
******************************************************************************"""


def turn_on_debug() -> None:
    """The demo runs the site's default settings in debug mode (it and the processes it
    starts), and says so; those settings are secure otherwise."""
    os.environ["DJANGO_SETTINGS_MODULE"] = "demo.settings.site"
    os.environ["DJANGO_DEBUG"] = "1"
    print(DEBUG_BANNER, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m demo",
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
    parser.add_argument(
        "--reset-admin-password",
        action="store_true",
        help="give the existing admin user a new password (printed); by default an existing "
        "user keeps its password unless DEMO_ADMIN_PASSWORD is set",
    )
    parser.add_argument("chart", nargs="?", help="an SCXML file for --walkthrough/--memory")
    args = parser.parse_args(argv)
    if args.memory:
        from demo import memory

        return memory.run(args.chart or str(memory.EXAMPLE))
    if args.chart and not args.walkthrough:
        parser.error("a chart file is only used with --walkthrough or --memory")
    turn_on_debug()
    if args.walkthrough:
        from demo import durable

        return durable.main(args.chart)
    from demo import site

    return site.main(args.host, args.port, reset_admin_password=args.reset_admin_password)


if __name__ == "__main__":
    sys.exit(main())
