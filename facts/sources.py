"""The public documents behind the facts: cite these, never a private note."""

from __future__ import annotations

from typing import Final

# RunPod's REST v2 OpenAPI document (`api-reference-v2/openapi.json` in github.com/runpod/docs, "Frontdoor
# v2.9.0"); the emulator validates against a copy of it and tests compare our enums with it.
OPENAPI_V2: Final = "RunPod REST v2 OpenAPI (github.com/runpod/docs api-reference-v2/openapi.json)"
PRICING: Final = "https://docs.runpod.io/pods/pricing"
BILLING: Final = "https://docs.runpod.io/get-started/billing-information"
SECRETS: Final = "https://docs.runpod.io/pods/templates/secrets"
INSTANT_CLUSTERS: Final = "https://docs.runpod.io/instant-clusters/configuration"
SPOT: Final = "https://docs.runpod.io/pods/pricing#spot"
S3_BUCKET_NAMING: Final = "https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html"
