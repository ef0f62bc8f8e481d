"""scripts/supervise: observe a running stack, decide purely, release its compute through Pulumi, record."""
