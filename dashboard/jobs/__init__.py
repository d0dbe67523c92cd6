"""The jobs pages: the list and its bulk actions, a job with its versions, the job form."""
