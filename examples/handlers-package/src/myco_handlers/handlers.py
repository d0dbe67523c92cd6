"""Found by Tickwork at start, as the built-in apps' handlers.py are."""

from rest_framework import serializers

from myco_handlers.models import Charge
from tickwork import HandlerContext, PayloadSerializer, register


class GreetPayload(PayloadSerializer):
    name = serializers.CharField(max_length=100)
    language = serializers.ChoiceField(choices=["en", "fr"], required=False)


@register("myco.greet", payload=GreetPayload)
def greet(ctx: HandlerContext):
    """Greets `name` in `language` (en or fr). A payload that does not fit is refused when the
    job is submitted, naming the field."""
    hello = {"en": "hello", "fr": "bonjour"}[ctx.payload.get("language", "en")]
    return {"message": f"{hello}, {ctx.payload['name']}"}


class ChargePayload(PayloadSerializer):
    customer = serializers.CharField(max_length=100)
    amountCents = serializers.IntegerField(min_value=1)


@register("myco.charge", atomic=True, payload=ChargePayload)
def charge(ctx: HandlerContext):
    """Records a charge in this package's own table, inside the transaction that records the
    execution's success: the row exists exactly when the execution SUCCEEDED."""
    row = Charge.objects.create(
        execution_id=ctx.execution_id, customer=ctx.payload["customer"], amount_cents=ctx.payload["amountCents"]
    )
    return {"chargeId": row.pk}


class CountPayload(PayloadSerializer):
    upTo = serializers.IntegerField(min_value=1, max_value=100_000)
    failFirstAttemptAt = serializers.IntegerField(
        min_value=1, required=False, help_text="Fail the first attempt after this step, to show the resume."
    )


@register("myco.count", payload=CountPayload)
def count(ctx: HandlerContext):
    """Counts to `upTo`, one checkpoint a step: a retry starts after the last step saved."""
    saved = ctx.load_checkpoint() or {}
    start = saved.get("done", 0)
    for step in range(start + 1, ctx.payload["upTo"] + 1):
        ctx.check_cancelled()
        ctx.save_checkpoint({"done": step})
        if ctx.attempt == 1 and step == ctx.payload.get("failFirstAttemptAt"):
            raise RuntimeError(f"failing on purpose after step {step}")
    return {"counted": ctx.payload["upTo"], "resumedAfter": start}
