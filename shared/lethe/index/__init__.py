"""Secondary indexes on erasure keys (DESIGN §6b): build, probe, upkeep under erasure, verify."""
