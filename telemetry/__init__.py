"""OpenTelemetry, the one package that speaks it (tracing.py): on the ground floor, so that every
layer above can trace its own work."""
