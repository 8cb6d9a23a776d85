"""Operations: what an operator runs on executions and their rows: the read model
(inspection), retention and erasure, re-encryption, export and import (transfer),
chart migration, replay, health."""
