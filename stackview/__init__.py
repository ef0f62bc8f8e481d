"""A live stack as seen from outside: its outputs, each job's aggregator over SSH, RunPod's billing and logs,
the nodes' exit records (`sources.py`), joined per node (`snapshot.py`). Read by `scripts/watch` and by the
supervisor alike, so both see a node the same way; neither of them is imported here."""
