"""The dashboard has no models of its own any more: the audit log moved to the `audit` app, below
the API and the admin, which record into it too. The names stay importable from here."""

from audit.models import AuditEntry, AuditOutcome

__all__ = ["AuditEntry", "AuditOutcome"]
