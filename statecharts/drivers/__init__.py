"""Drivers: hosts that perform the effects the core computes (in memory, durable)."""
