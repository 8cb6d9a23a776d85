"""A REST API over charts and executions (Django REST framework), plus the endpoints that
installed apps contribute (the timers app: ``/timers/``; see ``statecharts.extensions``).

Thin views over the plain service functions (``statecharts.stepper``): every write goes
through the same stepper as management commands and workers. Mount it with::

    path("api/", include("statecharts.api.urls"))

One concern per module: ``serializers`` (shapes), ``validators`` (input rules), ``fields``
(JSON values out), ``views``, ``urls``, ``permissions``, ``pagination``, ``filters``,
``parsers``, ``renderers`` and ``exceptions``; the operator's actions on executions beyond a
step: ``migration``, ``erasure``, ``tracing``; the outbox and its retry: ``outbox``; and
``operating``, the one path of an operator's action on a row of another app's table (the
timers, routes and invocations apps build their action views on it).
"""
