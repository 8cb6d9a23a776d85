"""The python-statemachine side of the benchmark chart (found by python-statemachine's Django
autodiscovery of ``statemachines`` modules, as its Django integration documents).

The same three states as the SCXML chart: ``advance`` cycles a -> b -> c -> a; b -> c has the
guard on a datamodel value (``count < limit``) and the one assignment (``count += 1``)."""

from __future__ import annotations

from statemachine import State, StateMachine


class CycleMachine(StateMachine):
    a = State(initial=True)
    b = State()
    c = State()

    advance = a.to(b) | b.to(c, cond="under_limit", on="count_up") | c.to(a)

    def under_limit(self) -> bool:
        return self.model.count < self.model.limit

    def count_up(self) -> None:
        self.model.count += 1
