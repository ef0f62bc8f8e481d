"""The local cloud: a local RunPod (the emulator) and a moto S3 on this machine, part of the product
(`scripts/up`'s demo, `trainstack local-runpod`), used by the operator tools and the test harness alike.

| module | what |
|---|---|
| `localcloud.processes` | the servers' command lines, a free port, the wait until a server answers |
| `localcloud.servers` | the servers left running between commands: state, addresses, boots, lifecycle |
| `localcloud.moto_server` | moto's S3 with the TLS-only bucket policy's condition evaluated as on AWS |

Above `emulator/` and `common/`, below `ops/` and `harness/` (docs/ARCHITECTURE.md): the harness keeps only
what tests need (servers as children of a test, the admin API, fast timings).
"""
