"""What a handler package imports from Tickwork: the one surface promised to code outside this
repository (README, "Your own handlers"). The modules behind it are Tickwork's own and may move;
these names stay.

    from tickwork import HandlerContext, PayloadSerializer, register

    class GreetPayload(PayloadSerializer):
        name = serializers.CharField()

    @register("myco.greet", pool="default", payload=GreetPayload)
    def greet(ctx: HandlerContext):
        return {"message": f"hello, {ctx.payload['name']}"}
"""

from jobs.payloads import StrictSerializer as PayloadSerializer
from jobs.registry import register
from worker.context import ExecutionStopped, HandlerContext

__all__ = ["ExecutionStopped", "HandlerContext", "PayloadSerializer", "register"]
