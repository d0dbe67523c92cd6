"""The services that write: creating jobs and changing them (update, pause, resume, cancel,
trigger), runs and their admission as wholes, the dispatcher's claim and the fair order of
admission, changes asked of executions (cancel, re-drive, discard), the retry policy's verdict on
a failure, pool pauses and the pruning of runs and jobs. Each moves executions only through the
named transitions of executions/, the layer below."""
