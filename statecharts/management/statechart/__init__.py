"""The subcommands of ``manage.py statechart``, one module per subcommand or small group.

``statecharts/management/commands/statechart.py`` (where Django looks for the command) only
lists them (``SUBCOMMANDS``) and dispatches. Each module declares its subcommands as
:class:`~statecharts.management.statechart.common.Subcommand` records: a name, a help line,
a function adding its arguments and a ``handle`` that parses the options, calls the plain
function doing the work (``statecharts.stepper``, ``statecharts.operations.*``,
``statecharts.policies.*``: tests call those directly) and prints. What every subcommand
shares (lookups, ``--as-user``, the JSON options, the answer to a refusal) is in
:mod:`~statecharts.management.statechart.common`.
"""
