"""What tests and benchmarks share: a local RunPod and moto as a test's own children (`harness.local`, over
the product's local cloud, localcloud/) and driving the real pulumi CLI (`harness.pulumi_cli`). Shipped code
never imports tests/, so this lives here; the operator tools (ops/) never import it."""
