"""Settings modules of the repository's site (the demo, the tests, a deployment).

None of them is part of the installed package: a host project has its own settings and adds
the apps as docs/installation.md says.

- ``demo.settings.site``: the default (``manage.py``). Safe unless you opt into debug:
  ``DEBUG`` is off unless ``DJANGO_DEBUG=1``; outside debug ``DJANGO_SECRET_KEY`` is required.
  ``bash scripts/demo`` turns debug on for itself and says so.
- ``demo.settings.production``: for a server (``demo/wsgi.py``'s default). Never debug; the
  secret key and ``DJANGO_ALLOWED_HOSTS`` are required; HTTPS only; a shared cache.
  ``manage.py check --deploy`` is clean for it. See docs/deployment.md.
- ``demo.settings.test``: the test suite, benchmarks and conformance tools. Not for serving.
- ``demo.settings.base``: what they share.
"""
