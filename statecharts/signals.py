"""Signals the stepper sends, inside the step's transaction (a receiver that raises rolls the
step back, so keep receivers small; use ``transaction.on_commit`` for work after commit).

- ``step_finished(sender=Execution, execution, entry, effects, instructions)``: an input was
  applied; ``instructions`` are the planner's, one per effect, in order.
- ``execution_finished(sender=Execution, execution)``: it became completed, failed or cancelled.
- ``input_discarded(sender=Execution, execution, entry)``: an input reached a finished execution.
- ``execution_halted(sender=Execution, execution, entry)``: a step went over a budget and was
  rolled back; the execution is now ``halted`` (``entry`` records the refused input).
"""

from django.dispatch import Signal

step_finished = Signal()
execution_finished = Signal()
input_discarded = Signal()
execution_halted = Signal()
