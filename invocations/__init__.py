"""Invocation rows and invoke handlers (see issue: invocations)."""
