"""trainstack's exceptions: one root (`common.errors`, re-exported here), and the whole tree drawn here.

    TrainstackError                  root (common.errors): raised on purpose, with a message for people
    ├── SettingsError                common.errors: an environment knob (providers.settings) is malformed
    ├── stackconfig.config.ConfigError   the stack config breaks rules; lists every key path (also ValueError)
    ├── forecast.compute.ForecastError   the input cannot be forecast (also ValueError)
    ├── stackview.sources.WatchError   a live stack's outputs or node 0 cannot be read (also RuntimeError)
    ├── BucketError                  providers.s3.errors: an S3 call refused or failed; says what to check
    ├── DeliveryError                providers.delivery.ssh: a delivery step failed for good
    │   └── UnreachableError         ssh could not connect until the deadline passed
    └── RunPodError                  providers.runpod.errors: every RunPod call
        ├── RunPodSettingsError      no API key / bad URL (also a SettingsError)
        ├── TransportError           connection failed or timed out after retries (no HTTP status)
        │   └── UncertainRequestError    a POST was sent but its outcome is unknown
        ├── DeadlineExceeded         a wait (retry loop, readiness poll) ran past its total deadline
        ├── PreviewWriteError        TRAINSTACK_READ_ONLY=1 (a preview) and a write was asked: never sent
        └── ApiError                 RunPod answered with an error; carries `status`, `method`, `path`
            ├── AuthError                401/403: the key is missing, wrong, or lacks access
            │   └── WriteRefusedError    403 on a write: a Read Only or Restricted key (a preview's)
            ├── NotFoundError            404: the thing is gone (read/delete treat this as success)
            ├── ConflictError            409: not valid in the current state
            ├── InvalidRequestError      422, or a 400 rule violation; never retried
            ├── InsufficientBalanceError 402: add credit
            ├── NoCapacityError          400 "no longer any instances available": try another candidate
            │   └── SpotRefusedError     RunPod would not place interruptible (spot) capacity
            ├── SpendLimitError          the account spend limit would be exceeded
            ├── RateLimitedError         429 kept coming until the deadline
            ├── GoneError                410: RunPod retired the API (GraphQL); never retried
            ├── ServerError              5xx kept coming until the deadline
            └── GraphQLError             HTTP 200 with an `errors` array that matched nothing above

Messages never copy response bodies or headers and never contain a credential. Inside Pulumi's
dynamic-provider host every `TrainstackError` is shown as its message, not as a traceback (`install`
below, run once when this module is imported); anything else keeps its traceback for debugging.
"""

from __future__ import annotations

from common.errors import SettingsError, TrainstackError
from providers import display

__all__ = ["SettingsError", "TrainstackError", "install"]


def install() -> None:
    """Show trainstack's errors as their message inside the provider host (a no-op anywhere else)."""
    display.install(TrainstackError)


install()
