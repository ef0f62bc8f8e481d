"""The cluster as one Pulumi component: `H100Cluster` (cluster.py) turns a parsed stack config into typed
provider inputs, with the checks before anything registers (guards.py), the names it owns (names.py) and the
pure rendering of what the nodes get (render.py, alerts.py, delivery.py)."""
