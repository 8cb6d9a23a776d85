"""What the ECMAScript realm refuses, removes or fixes, as one declared table.

``sandbox.js`` (step 2 and 3 of its lockdown) applies this table to every fresh QuickJS
context before any chart code runs: ``ecmascript.py`` hands it over as JSON. A refusal
throws a ``TypeError`` whose message says what was refused; chart code sees it as
``error.execution``. Beyond the table, the realm's lockdown freezes every object reachable
from the global object (built-in prototypes, constructors, namespaces and the machinery's own
functions) and makes every built-in global read-only; the global object itself only takes
plain variables. ``tests/core/test_sandbox_refusals.py`` walks this table against a live
realm: every entry refused, removed or fixed there.
"""

from __future__ import annotations

import json
from typing import Final

# Functions that would make a step depend on something other than its input: calling one
# throws "<what> is not available inside a statechart". (global, member, what)
REFUSED_CALLS: Final = (
    ("Date", "now", "Date.now()"),
    ("Math", "random", "Math.random()"),
)
# The Date constructor: the clock is refused, a date from its arguments is not.
DATE_CALLED: Final = "Date()"
DATE_CONSTRUCTED_WITHOUT_ARGUMENTS: Final = "new Date() without arguments"
# Globals deleted: the clock; what garbage collection decides (WeakRef.deref, finalizers);
# a job queue that no step ever runs; proxies (a snapshot must read a value without running
# chart code, and every question asked of a proxy runs its handler).
REMOVED_GLOBALS: Final = (
    "performance", "WeakRef", "FinalizationRegistry", "queueMicrotask", "Proxy",
)
# Members QuickJS keeps in the context behind setters: replaced by read-only values.
FIXED_MEMBERS: Final = (
    ("Error", "prepareStackTrace"),
    ("Error", "stackTraceLimit"),
)
# Functions refused when given the global object (it holds the datamodel: it cannot be
# frozen, sealed or given another prototype); Reflect's answer false instead of throwing.
REFUSED_ON_THE_GLOBAL_OBJECT: Final = (
    ("Object", "freeze"),
    ("Object", "seal"),
    ("Object", "preventExtensions"),
    ("Reflect", "preventExtensions"),
    ("Object", "setPrototypeOf"),
    ("Reflect", "setPrototypeOf"),
)
# Object.prototype's accessor definers, refused on the global object (only plain variables).
ACCESSORS_REFUSED_ON_THE_GLOBAL_OBJECT: Final = ("__defineGetter__", "__defineSetter__")


def as_json() -> str:
    """The table as sandbox.js reads it."""
    return json.dumps({
        "refused_calls": REFUSED_CALLS,
        "date_called": DATE_CALLED,
        "date_constructed_without_arguments": DATE_CONSTRUCTED_WITHOUT_ARGUMENTS,
        "removed_globals": REMOVED_GLOBALS,
        "fixed_members": FIXED_MEMBERS,
        "refused_on_the_global_object": REFUSED_ON_THE_GLOBAL_OBJECT,
        "accessors_refused_on_the_global_object": ACCESSORS_REFUSED_ON_THE_GLOBAL_OBJECT,
    })
