"""The README's main job: ``bash scripts/demo`` (``python -m statecharts.demo``).

By default it runs the example order chart durably on the configured database (SQLite
unless DATABASE_URL says otherwise); ``--memory`` runs it through the in-memory driver and
prints the interpreter's trace instead.
"""
