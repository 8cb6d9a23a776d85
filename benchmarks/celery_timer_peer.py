"""The Celery side of ``benchmarks/timer_peers.py`` (imported by the Celery worker it starts).

One task, ``fire(item, due)``: one INSERT into PostgreSQL on the worker process's own
connection, committed (autocommit, ``synchronous_commit`` as the server has it), stamped
with ``clock_timestamp()`` by the server: a durable write per task, the work a Celery user
would do when a delayed job fires. Configured from the environment the script sets:
``TIMER_PEERS_BROKER`` (a Redis URL), ``TIMER_PEERS_QUEUE`` and ``TIMER_PEERS_PG`` (a
PostgreSQL URL whose database holds ``bench_celery_fire``).
"""

from __future__ import annotations

import os
from typing import Any

import psycopg
from celery import Celery
from celery.signals import worker_process_init

app = Celery(
    "timer_peers", broker=os.environ.get("TIMER_PEERS_BROKER", "redis://127.0.0.1:6379/13")
)
app.conf.update(
    task_default_queue=os.environ.get("TIMER_PEERS_QUEUE", "timer_peers"),
    task_ignore_result=True,
    worker_hijack_root_logger=False,
    broker_connection_retry_on_startup=True,
)

_connection: Any = None


@worker_process_init.connect
def _connect(**_kwargs: Any) -> None:
    """One connection per prefork child, opened when it starts (not per task)."""
    global _connection
    _connection = psycopg.connect(os.environ["TIMER_PEERS_PG"], autocommit=True)


@app.task(name="timer_peers.fire")
def fire(item: int, due: float) -> None:
    _connection.execute(
        "INSERT INTO bench_celery_fire (item, due, committed)"
        " VALUES (%s, %s, extract(epoch FROM clock_timestamp()))",
        [item, due],
    )
