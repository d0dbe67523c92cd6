"""What the pages, the API, the command line and /metrics read: selectors, the read models built
from the executions tables (backlog, last runs, pending reasons, dead letter, start lag, pool
history, logs, runs' states) and the metrics' snapshot. It only reads; the writes are below it."""
