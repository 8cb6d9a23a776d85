"""Order the children of one compound state into layers, top to bottom.

A small Sugiyama-style pass over the transitions between siblings: a depth-first search from
the initial child turns cycles into a DAG (back edges are ignored), every child goes to the
layer after its deepest predecessor (longest path), and a barycenter sweep down then up
orders each layer to cut crossings. Ties always fall back to document order, so the result
is a function of the chart alone. Linear in children and edges, plus the sorts.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence


def layer(
    children: Sequence[int], edges: Iterable[tuple[int, int]], first: int | None
) -> list[list[int]]:
    """Children (state indices, document order) grouped into ordered layers.

    ``edges`` are (from child, to child) pairs between distinct children; ``first`` is the
    initial child, which always opens the first layer."""
    order = {c: i for i, c in enumerate(children)}
    if first not in order:
        first = None
    successors: dict[int, list[int]] = {c: [] for c in children}
    for u, v in edges:
        if u == v or u not in order or v not in order or v == first:
            continue
        if v not in successors[u]:
            successors[u].append(v)

    dag = _acyclic(children, successors, first)
    depth = {c: 0 for c in children}
    for u in _topological(children, dag, first):
        for v in dag[u]:
            depth[v] = max(depth[v], depth[u] + 1)

    layers: list[list[int]] = [[] for _ in range(max(depth.values(), default=-1) + 1)]
    for c in _roots(children, first):
        layers[depth[c]].append(c)
    _reduce_crossings(layers, dag, order)
    return layers


def _roots(children: Sequence[int], first: int | None) -> list[int]:
    return ([first] if first is not None else []) + [c for c in children if c != first]


def _acyclic(
    children: Sequence[int], successors: dict[int, list[int]], first: int | None
) -> dict[int, list[int]]:
    """The successor lists without the back edges of an iterative depth-first search."""
    state = dict.fromkeys(children, 0)  # 0 new, 1 on the stack, 2 finished
    dag: dict[int, list[int]] = {c: [] for c in children}
    for root in _roots(children, first):
        if state[root]:
            continue
        state[root] = 1
        stack = [(root, 0)]
        while stack:
            node, i = stack[-1]
            if i == len(successors[node]):
                state[node] = 2
                stack.pop()
                continue
            stack[-1] = (node, i + 1)
            nxt = successors[node][i]
            if state[nxt] == 1:
                continue  # back edge: dropped
            dag[node].append(nxt)
            if state[nxt] == 0:
                state[nxt] = 1
                stack.append((nxt, 0))
    return dag


def _topological(
    children: Sequence[int], dag: dict[int, list[int]], first: int | None
) -> list[int]:
    indegree = dict.fromkeys(children, 0)
    for u in children:
        for v in dag[u]:
            indegree[v] += 1
    ready = deque(c for c in _roots(children, first) if indegree[c] == 0)
    result: list[int] = []
    while ready:
        u = ready.popleft()
        result.append(u)
        for v in dag[u]:
            indegree[v] -= 1
            if indegree[v] == 0:
                ready.append(v)
    return result


def _reduce_crossings(
    layers: list[list[int]], dag: dict[int, list[int]], order: dict[int, int]
) -> None:
    predecessors: dict[int, list[int]] = {c: [] for c in order}
    for u, vs in dag.items():
        for v in vs:
            predecessors[v].append(u)
    position: dict[int, float] = {}
    for items in layers:
        for i, c in enumerate(items):
            position[c] = i
    for neighbours, sweep in ((predecessors, layers[1:]), (dag, layers[-2::-1])):
        for items in sweep:
            keys = {}
            for i, c in enumerate(items):
                near = [position[n] for n in neighbours[c]]
                keys[c] = (sum(near) / len(near) if near else float(i), order[c])
            items.sort(key=keys.__getitem__)
            for i, c in enumerate(items):
                position[c] = i
