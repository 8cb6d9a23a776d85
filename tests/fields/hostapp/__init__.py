"""A host project's own app for the tests of ``statecharts.fields``: models with a
``StatechartField`` (installed by demo.settings.test only)."""
