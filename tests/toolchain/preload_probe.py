"""Imported by the provider host's preload: writes which process and thread imported it."""

import os
import threading
from pathlib import Path

with Path(os.environ["PRELOAD_PROBE_FILE"]).open("a") as out:
    out.write(f"import {os.getpid()} {threading.current_thread().name}\n")
