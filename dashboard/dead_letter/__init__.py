"""The dead letter grouped by error fingerprint, a group's executions, and the group actions."""
