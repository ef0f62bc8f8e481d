"""`scripts/watch`: the operator's view of a running stack (nodes, alerts, money)."""
