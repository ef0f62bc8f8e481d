"""RunPod and S3 facts the stack must respect: one home, no dependencies beyond the standard library.

Every figure names its public source (`facts.sources`). Components, providers, policies, the preview report
and the local RunPod read these modules, so their messages and their arithmetic agree.

| module | what |
|---|---|
| `facts.sources` | the public documents the figures come from |
| `facts.gpus` | GPU table: API id, GPUs per node, interconnect, spot, CUDA floor, why |
| `facts.money` | hours per month, the dated price snapshot, storage rates, the default spend limit |
| `facts.pods` | pod statuses (`PodStatus`, as RunPod's v2 spec enumerates them) |
| `facts.secrets` | secret names and the `{{ RUNPOD_SECRET_<name> }}` reference |
| `facts.s3` | S3 bucket-name rules |
| `facts.limits` | sizes and counts RunPod bounds (volumes, clusters, spot notice, rate quota) |
"""
