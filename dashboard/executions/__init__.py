"""The executions pages: the list and search, an execution with its logs, and the actions on them."""
