"""The one rule for whether a URL names this machine (issue #62): the target rule (ops/workspace.py) reads a
loopback RUNPOD_API_URL as the local RunPod, and the program (components/delivery.py) asks the local RunPod
whether it has hosts. Standard library only.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from urllib.parse import urlsplit

__all__ = ["is_loopback_url"]


def is_loopback_url(url: str) -> bool:
    """Whether an http(s) URL's host is this machine: `localhost` (any case, `*.localhost`, a trailing dot),
    any 127.0.0.0/8 spelling the resolver takes (`127.1`, `0x7f.1`), `::1`, the unspecified `0.0.0.0`/`::`
    (a connect to it reaches this machine) and IPv4-mapped loopback (`::ffff:127.0.0.1`). Parsed, never
    matched as text, so `127.0.0.1.example.com` is a remote host."""
    try:
        host = urlsplit(url.strip()).hostname  # lower case, brackets of an IPv6 literal removed
    except ValueError:
        return False
    if not host:
        return False
    host = host.rstrip(".")
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        address: ipaddress.IPv4Address | ipaddress.IPv6Address = ipaddress.ip_address(host.split("%")[0])
    except ValueError:
        if not re.fullmatch(r"(0x[0-9a-f]+|[0-9]+)(\.(0x[0-9a-f]+|[0-9]+)){0,3}", host):
            return False  # a name: never this machine's unless it is localhost
        try:  # the short and hex IPv4 forms getaddrinfo accepts: 127.1, 2130706433, 0x7f.0.0.1
            address = ipaddress.IPv4Address(socket.inet_aton(host))
        except OSError:
            return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback or address.is_unspecified
