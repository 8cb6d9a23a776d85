#!/usr/bin/env python
import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "demo.settings.site")
    # --settings (and --pythonpath) as Django reads them, before the settings are loaded below.
    from django.core.management.base import CommandParser, handle_default_options

    parser = CommandParser(add_help=False, allow_abbrev=False)
    parser.add_argument("--settings")
    parser.add_argument("--pythonpath")
    handle_default_options(parser.parse_known_args(sys.argv[2:])[0])
    from django.conf import settings
    from django.core.exceptions import ImproperlyConfigured
    from django.core.management import execute_from_command_line

    try:
        settings.INSTALLED_APPS  # noqa: B018 (loading the settings: they refuse to start here)
    except ImproperlyConfigured as exc:
        # The settings' own explanation (a missing secret key, hosts) is the whole answer:
        # one line, no traceback.
        sys.exit(f"manage.py: {exc}")
    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
