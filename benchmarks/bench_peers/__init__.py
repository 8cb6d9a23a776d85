"""A benchmark-only Django app: the models of the peers ``benchmarks/many_executions.py``
compares against (django-fsm-2 and python-statemachine, each bound to a model with an audit
table). Never installed by the project's settings and never in the wheel (tests/packaging):
only ``bench_peers.settings`` adds it, and its tables are made in the benchmark's throwaway
database (``schema_editor().create_model``), so it has no migrations."""
