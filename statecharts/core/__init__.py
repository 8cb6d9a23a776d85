"""The SCXML core: parse, validate, compile and interpret. No Django in here.

Public API::

    chart = load_chart(source)                  # ChartError lists every problem
    interpreter = Interpreter(chart)
    step = interpreter.initialize("session-1")  # Step(state, effects)
    step = interpreter.handle_event(step.state, Event("go"))
"""

from statecharts.core.compile import load_chart, load_chart_file
from statecharts.core.effects import Effect
from statecharts.core.errors import (
    ChartError,
    DatamodelError,
    NotRunningError,
    Problem,
    ResolveError,
    StatechartError,
)
from statecharts.core.events import Event
from statecharts.core.interpreter import Interpreter, Step
from statecharts.core.model import Chart
from statecharts.core.state import State

__all__ = [
    "Chart",
    "ChartError",
    "DatamodelError",
    "Effect",
    "Event",
    "Interpreter",
    "NotRunningError",
    "Problem",
    "ResolveError",
    "State",
    "StatechartError",
    "Step",
    "load_chart",
    "load_chart_file",
]
