"""S3 bucket-name rules: one rule set for the stack config and the bucket provider.

Source: `sources.S3_BUCKET_NAMING` (general purpose buckets).
"""

from __future__ import annotations

import re
from typing import Final

_SHAPE: Final = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_IP_ADDRESS: Final = re.compile(r"^\d{1,3}(\.\d{1,3}){3}$")
_RESERVED_PREFIXES: Final = ("xn--", "sthree-", "amzn-s3-demo-")
_RESERVED_SUFFIXES: Final = ("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3")
BUCKET_NAME_RULE: Final = (
    "use 3-63 lowercase letters, digits, '-' or '.', starting and ending with a letter or digit, "
    "with no '..', not shaped like an IP address, and without AWS's reserved prefixes "
    f"({', '.join(_RESERVED_PREFIXES)}) or suffixes ({', '.join(_RESERVED_SUFFIXES)})"
)


def bucket_name_problem(name: str) -> str | None:
    """Why `name` is not a valid S3 bucket name, or None when it is."""
    if not _SHAPE.match(name) or ".." in name or _IP_ADDRESS.match(name):
        return f"{name!r} is not a valid S3 bucket name; {BUCKET_NAME_RULE}"
    if name.startswith(_RESERVED_PREFIXES) or name.endswith(_RESERVED_SUFFIXES):
        return f"{name!r} uses a name AWS reserves; {BUCKET_NAME_RULE}"
    return None
