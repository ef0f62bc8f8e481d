"""trainstack Pulumi program: reads the stack config and declares the cluster."""
