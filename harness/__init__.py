"""What tests, benchmarks and demos share: starting a local RunPod and moto (`harness.local`) and driving
the real pulumi CLI (`harness.pulumi_cli`). Shipped code never imports tests/, so this lives here."""
