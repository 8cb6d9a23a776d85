"""Models of the ``statecharts`` app: charts, executions, their input history and outbox."""

from statecharts.models.charts import Chart
from statecharts.models.executions import Execution, ExecutionStatus
from statecharts.models.history import HistoryEntry
from statecharts.models.outbox import OutboxMessage

__all__ = ["Chart", "Execution", "ExecutionStatus", "HistoryEntry", "OutboxMessage"]
