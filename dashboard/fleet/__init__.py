"""The fleet: the Workers page (the registry's workers) and the pools with their pause and resume."""
