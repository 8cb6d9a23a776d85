"""The routes app's settings: keys of the one ``STATECHARTS`` dict (docs/routes.md).

Declared, with their defaults and what each is, in ``routes/declaration.py`` (the app's
declaration, read by ``statecharts.conf``); read through :data:`route_settings`. Checked by
``manage.py check`` (``routes.checks``): every route loads and is a ``Route``, its types are
not taken twice, its OVERRIDABLE keys are strings, and every settings-level override names a
registered route and only options that route lets a scope override.
"""

from __future__ import annotations

from statecharts.conf import statecharts_settings

route_settings = statecharts_settings
