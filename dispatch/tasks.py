from celery import shared_task

from dispatch import runner
from dispatch.publisher import TASK_NAME


@shared_task(name=TASK_NAME, ignore_result=True)
def run_execution(execution_id: str, lease_token: int) -> None:
    """Thin on purpose: the row, not the message, decides whether and what to run."""
    runner.run(execution_id=execution_id, lease_token=lease_token)
