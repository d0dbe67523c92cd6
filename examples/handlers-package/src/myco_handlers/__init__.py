"""An example Tickwork handler package (README.md beside pyproject.toml)."""
