from django.db import models


class Charge(models.Model):
    """A customer charged by `myco.charge`. One per execution: the handler's idempotency key is
    unique here, so no run can charge twice, whatever the broker delivers."""

    execution_id = models.UUIDField(unique=True)
    customer = models.CharField(max_length=100)
    amount_cents = models.PositiveIntegerField()
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.customer}: {self.amount_cents} cents"
