"""The operators' command line: `manage.py jobs …` and `manage.py executions …` (their modules in
web/management/commands/). Each subcommand is scoped to one tenant (`--tenant SLUG`), reads
through the selectors and acts through the services the API and the dashboard call, audits each
change as actor kind `cli` (the operating system's user), and prints a table, or with `--json`
the API's own representation of the same objects. README, "Command line".

- `arguments.py`: the parser: --tenant, --json, help on every flag, errors in one line;
- `lookup.py`: the tenant, and a job or an execution of it by its id, whole or short;
- `job_actions.py`: trigger, pause, resume, cancel, each with its audit row;
- `tables.py`: how rows and times are printed;
- `follow.py`: an execution's log lines, printed as they come until it ends.

In web/ because `--json` answers what the API answers (web/api's serializers), and web/ stands
above every service and selector the commands call.
"""
