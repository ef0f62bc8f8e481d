"""RunPod's REST v2 (and the GraphQL it still needs) as dynamic resources: pods, Instant Clusters, network
volumes, secrets and registry credentials, every call through the one chokepoint (http.py)."""
