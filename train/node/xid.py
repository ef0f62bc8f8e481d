"""XIDs by what fixes them: the one table (docs/RECOVERY.md prints it; tests/train/test_xid.py holds both
to it).

Source: NVIDIA, "Analyzing Xid Errors with the Xid Catalog" (docs.nvidia.com/deploy/xid-errors/
analyzing-xid-catalog.html), each XID's "Resolution Bucket (Immediate Action)": RESTART_APP is `restart`;
RESET_GPU, RESTART_BM and CONTACT_SUPPORT are `replace` (a rented container can neither reset a GPU nor
reboot its host). `restart`: the error belongs to the application that hit it
and ends with it (a process restart clears it; the node's agent ends the workers and torchrun's
--max-restarts brings them back from the newest checkpoint). `replace`: the GPU, its memory, its links or
its bus need a reset or a repair that a container on a rented machine cannot do, so the supervisor rents
another machine. An XID not in the table errs toward `replace`: restarting on hardware of unknown health
risks a second fault; renting again costs a boot.
"""

from __future__ import annotations

from typing import Literal

Action = Literal["restart", "replace"]

# code: (action, NVIDIA's name for it, why this action)
TABLE: dict[int, tuple[Action, str, str]] = {
    8: ("restart", "GPU stopped processing (channel idle timeout)", "the catalogue's RESTART_APP"),
    13: ("restart", "Graphics Engine Exception", "the application's own fault (e.g. an out-of-range access)"),
    31: ("restart", "GPU memory page fault", "an illegal address in the application: it ends with it"),
    43: ("restart", "GPU stopped processing", "the application's channel was reset; the GPU goes on"),
    45: ("restart", "Preemptive cleanup, due to previous errors", "the driver ended the faulty process"),
    68: ("restart", "NVDEC0 exception", "a video-decoder error of the application"),
    94: ("restart", "Contained ECC error", "contained to the application that hit it; others go on"),
    48: ("replace", "Double Bit ECC Error", "uncorrectable memory error: needs a GPU reset or repair"),
    61: ("replace", "Internal micro-controller breakpoint/warning", "firmware fault: needs a GPU reset"),
    62: ("replace", "Internal micro-controller halt", "firmware halted: needs a GPU reset"),
    63: ("replace", "ECC page retirement or row remapping recording event", "a row remap pending a reset"),
    64: ("replace", "ECC page retirement or row remapper recording failure", "the remap could not be kept"),
    74: ("replace", "NVLink Error", "a link fault: needs a reset, often the board"),
    79: ("replace", "GPU has fallen off the bus", "the GPU is gone from PCIe until the host is fixed"),
    92: ("replace", "High single-bit ECC error rate", "memory degrading"),
    95: ("replace", "Uncontained ECC error", "memory error that reached other processes: reset the GPU"),
    119: ("replace", "GSP RPC Timeout", "the GPU's system processor stopped answering: reset"),
    120: ("replace", "GSP Error", "the GPU's system processor failed: reset"),
}


def action(code: int) -> Action:
    """What fixes this XID: `restart` in place or `replace` the machine (unknown: replace)."""
    found = TABLE.get(code)
    return found[0] if found else "replace"


def split(codes: tuple[int, ...] | list[int]) -> tuple[list[int], list[int]]:
    """(restart-class, replace-class) codes of a list, in order."""
    return [c for c in codes if action(c) == "restart"], [c for c in codes if action(c) == "replace"]
