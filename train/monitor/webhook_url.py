"""Which URLs the alert webhook may be: checked by the aggregator on the node and by the program at preview
(components/guards.py), so a URL the aggregator would refuse never previews clean. Standard library only."""

from __future__ import annotations

import ipaddress
import urllib.parse


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def webhook_url_problem(url: str) -> str | None:
    """Why `url` cannot be the alert webhook, or None. Never quotes the URL: it is the secret."""
    try:
        parts = urllib.parse.urlsplit(url.strip())
        host = parts.hostname
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError:
        return "is not a URL; paste the webhook URL your chat gives, https://..."
    if parts.scheme not in ("https", "http") or not host:
        return (
            "must be an https:// URL (the webhook URL your chat gives); no scheme, file:// and the like "
            "are refused"
        )
    if parts.scheme == "http" and not _loopback(host):
        return (
            "must be https://: over http the URL, which is the secret, and every alert cross the network "
            "in clear"
        )
    if parts.username is not None or parts.password is not None:
        return "must not carry user:password@; webhooks authenticate by the URL itself"
    return None
