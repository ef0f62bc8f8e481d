"""The stack config (`trainstack:*` in stacks/Pulumi.<stack>.yaml): read, parsed once into typed models,
checked.

| module | what |
|---|---|
| `stackconfig.files` | the one door to `stacks/Pulumi.<stack>.yaml`: its config map, the stack names |
| `stackconfig.config` | the models (`StackConfig`, its sections), the keys, `ConfigProblem`, `ConfigError` |
| `stackconfig.loader` | `load_stack_config`: a config parsed into the models, each problem with its fix |
| `stackconfig.rules` | rules across fields: topology, capacity, placement, training, budget, model, Slurm |
| `stackconfig.derived` | what follows from the whole config: the cost cap, its and the webhook notices |
| `stackconfig.pricing` | what a stack costs per hour at the price snapshot, in the providers' terms |
| `stackconfig.model` | `training.model`: the model the forecast reads |
| `stackconfig.alerts` | `trainstack:alerts`: the thresholds, the aggregator's rules, Prometheus rules |
| `stackconfig.credentials` | credential shapes a plain-text value must not hold |
| `stackconfig.image_ref` | the container image reference grammar |

Below the component, the forecast and the operator tools; above only `facts/`, `common/` and `train/monitor`
(the alert rules record the nodes read). Nothing here talks to RunPod, S3 or Pulumi.
"""
