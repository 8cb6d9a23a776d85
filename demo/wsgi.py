"""The WSGI entry point of the repository's site (``gunicorn demo.wsgi``; docs/deployment.md).

Served this way the site runs ``demo.settings.production`` unless DJANGO_SETTINGS_MODULE says
otherwise (``manage.py runserver`` has already set it to ``demo.settings.site``).
"""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "demo.settings.production")
application = get_wsgi_application()
