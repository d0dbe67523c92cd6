"""The overview: counts by state, the last hour, the queues, and the fleet's charts over a range."""
