"""Models of the ``statecharts`` app: charts, executions, their input history and outbox."""

from statecharts.models.charts import Chart
from statecharts.models.executions import Execution, ExecutionState, ExecutionStatus
from statecharts.models.history import HistoryEntry
from statecharts.models.idempotency import StartKey
from statecharts.models.outbox import AppliedMessage, OutboxMessage

__all__ = [
    "AppliedMessage",
    "Chart",
    "Execution",
    "ExecutionState",
    "ExecutionStatus",
    "HistoryEntry",
    "OutboxMessage",
    "StartKey",
]
