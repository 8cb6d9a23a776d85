"""Shared policies every door and the stepper apply: validation of outside data,
the refusal table, who may do what (authorization), who did it (attribution),
idempotency keys, payload codecs, subjects, I/O processor addresses, and the lookup
rule for what a person types."""
