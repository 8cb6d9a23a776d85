"""The repository's demo site and the README's main job: ``bash scripts/demo``
(``python -m demo``). Not part of the installed package.

- ``demo.settings``: the site's settings modules (default, production, tests);
- ``demo.urls``, ``demo.views``, ``demo.wsgi``: the site (the library's admin and API, a
  landing page, the API docs page, the password-for-token endpoint);
- ``demo.database``: ``DATABASE_URL`` to a ``DATABASES`` entry;
- ``demo.site``: runs the web server and the timer worker together (the default);
- ``demo.durable`` (``--walkthrough``): the example order, durably, in the terminal;
- ``demo.memory`` (``--memory``): the example order in memory, with the interpreter's trace.
"""
