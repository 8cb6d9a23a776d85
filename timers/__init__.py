"""Durable timers: delayed sends that outlive every process (see issue: timers)."""
