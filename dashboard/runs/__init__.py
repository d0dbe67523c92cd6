"""The run page: a workflow run's state, its steps as a graph, and a table of them."""
