"""Routes: ``<send type="...">`` to destinations the host registers (docs/routes.md)."""
