"""Counts the SQL statements a benchmark role sends (bench/cost.py), in the role's own process.

The benchmark starts its roles (workers, the dispatcher, the web server) with this directory on
PYTHONPATH, so Python imports this module at start-up, and with TICKWORK_BENCH_STATEMENTS naming
a directory. Every connection Django opens in the process, or in a process forked from it (a
Celery pool process), gets an execute wrapper that counts: what the store's statements and the
ORM's send, through `connection.execute_wrappers`, as the benchmark counts its own (BEGIN and
COMMIT aside). A thread writes the process's count to `<directory>/<role>.<pid>` twice a second,
so counting costs a statement an increment, not a write. pg_stat_statements would count them on
the server, but it needs `shared_preload_libraries`, which the benchmark may not change."""

import os

DIRECTORY = os.environ.get("TICKWORK_BENCH_STATEMENTS")


def _install() -> None:
    import threading
    import time

    from django.db.backends.signals import connection_created

    counted = {"pid": 0, "statements": 0}
    role = os.environ.get("TICKWORK_BENCH_ROLE", "role")

    def write() -> None:
        path, written = os.path.join(DIRECTORY, f"{role}.{os.getpid()}"), -1
        while True:
            time.sleep(0.5)
            if counted["statements"] != written:
                written = counted["statements"]
                with open(path + ".part", "w") as out:
                    out.write(str(written))
                os.replace(path + ".part", path)  # a reader never sees half a number

    def count(execute, sql, params, many, context):
        if counted["pid"] != os.getpid():  # the first statement of this process (or fork)
            counted.update(pid=os.getpid(), statements=0)
            threading.Thread(target=write, name="bench-statements", daemon=True).start()
        counted["statements"] += len(params) if many else 1
        return execute(sql, params, many, context)

    def wrap(sender, connection, **kwargs) -> None:
        if count not in connection.execute_wrappers:
            connection.execute_wrappers.append(count)

    connection_created.connect(wrap, weak=False)


if DIRECTORY:
    _install()
