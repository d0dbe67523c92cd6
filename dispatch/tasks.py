from celery import shared_task
from celery.signals import worker_process_shutdown, worker_shutdown

from dispatch import runner
from dispatch.publisher import TASK_NAME

# How long a worker process that is ending waits for its queued outcomes to be recorded.
OUTCOME_FLUSH_SECONDS = 30


@shared_task(name=TASK_NAME, ignore_result=True)
def run_execution(execution_id: str, lease_token: int) -> None:
    """Thin on purpose: the row, not the message, decides whether and what to run."""
    runner.run(execution_id=execution_id, lease_token=lease_token, defer_success=True)


@worker_process_shutdown.connect  # a prefork child that ends: max tasks, warm shutdown
@worker_shutdown.connect  # the solo and threads pools run tasks in the main process
def record_queued_outcomes(**kwargs) -> None:
    if not runner.flush_outcomes(timeout=OUTCOME_FLUSH_SECONDS):
        runner.logger.error("outcomes still queued at exit; their runs will be retried when their leases expire")
