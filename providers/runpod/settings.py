"""Where the RunPod API is and the key to it, for this process: env first, then stack config.

Kept apart from client.py so `configure()` (which every provider runs when it is unpickled) records the
stack config without loading the HTTP stack: a preview that never calls RunPod never imports httpx.
"""

from __future__ import annotations

import threading
from urllib.parse import urlsplit

from providers.runpod import errors
from providers.settings import DEFAULT_API_URL, current

URL_ENV = "RUNPOD_API_URL"
KEY_ENV = "RUNPOD_API_KEY"

_process_config: dict[str, str] = {}
_process_lock = threading.Lock()


def set_process_config(api_url: str | None, api_key: str | None) -> None:
    """Remember stack config `runpod:apiUrl`/`runpod:apiKey` for this process (env still wins)."""
    with _process_lock:
        for name, value in (("api_url", api_url), ("api_key", api_key)):
            if value:
                _process_config[name] = value


def resolve_credentials() -> tuple[str, str]:
    knobs = current()
    url = knobs.runpod_api_url or _process_config.get("api_url") or DEFAULT_API_URL
    key = knobs.runpod_api_key or _process_config.get("api_key") or ""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise errors.RunPodSettingsError(
            f"{URL_ENV} / runpod:apiUrl must be an http(s) URL like {DEFAULT_API_URL}"
        )
    if not key:
        raise errors.RunPodSettingsError(
            f"no RunPod API key: export {KEY_ENV} or run `pulumi config set --secret runpod:apiKey <key>`"
        )
    return url.rstrip("/"), key
