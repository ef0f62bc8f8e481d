"""Pulumi dynamic providers: the only code that talks to RunPod (runpod/), S3 (s3/) or, over SSH, to the
nodes (delivery/); one resource base (resource.py) and one error tree (errors.py). providers/README.md says
how to add a resource."""
