"""Node-side tools the start script runs: GPU health gate, straggler test, burn-in, metrics agent.

Nothing here may import trainstack's control-plane packages: only the standard library, torch, nvidia-ml-py
and prometheus-client exist on a node (requirements-node.txt).
"""
