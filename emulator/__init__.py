"""Local RunPod: RunPod's REST v2, a GraphQL subset and a fault-injection admin API, on loopback."""
