"""The audit page: the audit log, filtered."""
