"""Reads on a streaming replica (README, "Reads on a replica"): which reads may go to it
(`routing`), whether it is fit to serve them (`health`) and whose reads must not, having just
written (`writes`). Only a web request's reads are ever routed to it: the dispatcher, the workers
and the sweeper never set a read scope, so they read and write the primary alone."""
