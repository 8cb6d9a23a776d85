"""Moving running executions between versions of their chart (docs/versions-and-migration.md).

``mapping``: a position of one version as a position of another (pure). ``applying``: plans,
dry runs, and the migration of each execution in its own transaction.
"""

from statecharts.operations.chart_migration.applying import (
    MIGRATABLE_STATUSES,
    ExecutionReport,
    MigrationPlan,
    PlanError,
    TransformContext,
    Verdict,
    dry_run,
    migrate,
    migrate_one,
)
from statecharts.operations.chart_migration.mapping import Unmappable, map_state

__all__ = [
    "MIGRATABLE_STATUSES",
    "ExecutionReport",
    "MigrationPlan",
    "PlanError",
    "TransformContext",
    "Unmappable",
    "Verdict",
    "dry_run",
    "map_state",
    "migrate",
    "migrate_one",
]
