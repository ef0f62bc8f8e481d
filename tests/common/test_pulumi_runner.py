"""The one Pulumi CLI runner (common/pulumi.py) as the supervisor uses it: flags placed before a `--` that
ends them, a command's lines handed over as it prints them, its `--event-log` read as it is written, and a
failure's output kept for the caller. A small stand-in program plays `pulumi` (`binary=`): no engine boots."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from common import pulumi

# Prints two lines, writes three events (one in two pieces and one line that is not JSON between them),
# exits with the code in $CODE; it checks that the debug flag the CLI needs for --event-log is set.
FAKE = textwrap.dedent(
    """\
    import json, os, sys
    argv = sys.argv[1:]
    log = argv[argv.index("--event-log") + 1] if "--event-log" in argv else None
    print("Updating (dev)", flush=True)
    if log:
        assert os.environ.get("PULUMI_DEBUG_COMMANDS") == "true"
        with open(log, "a") as f:
            f.write(json.dumps({"sequence": 1, "resOutputsEvent": {"metadata": {"op": "same"}}}) + "\\n")
            f.flush()
            f.write('{"sequence": 2, "summaryEvent": ')
            f.flush()
            f.write('{"resourceChanges": {"same": 3}}}\\nnot json\\n[1]\\n')
    print("error: " + " ".join(argv), file=sys.stderr, flush=True)
    sys.exit(int(os.environ.get("CODE", "0")))
    """
)


@pytest.fixture
def fake(tmp_path: Path) -> str:
    script = tmp_path / "fake-pulumi"
    script.write_text(f"#!{sys.executable}\n{FAKE}")
    script.chmod(0o755)
    return str(script)


def test_flags_go_before_the_end_of_flags() -> None:
    argv = pulumi.command(["config", "set", "--path", "k[0]", "--", "-1"], stack="dev", cwd=Path("/w"))
    assert argv == [
        *("pulumi", "config", "set", "--path", "k[0]"),
        *("--stack", "dev", "--cwd", "/w", "--non-interactive", "--", "-1"),
    ]
    assert pulumi.command(["up"], stack="dev")[-3:] == ["--stack", "dev", "--non-interactive"]


def test_lines_and_events_are_handed_over_in_order(fake: str) -> None:
    lines: list[str] = []
    events: list[dict[str, Any]] = []
    done = pulumi.run(
        ["up", "--yes"], stack="dev", binary=fake, on_output=lines.append, on_event=events.append
    )
    assert done.returncode == 0
    assert lines[0] == "Updating (dev)\n" and lines[1].startswith("error: up --yes --event-log ")
    assert done.stdout == "".join(lines)  # stderr joins stdout, in the order printed
    assert [e["sequence"] for e in events] == [1, 2]  # the line written in two pieces is one event
    assert events[1]["summaryEvent"]["resourceChanges"] == {"same": 3}
    assert not list(Path(lines[1].split("--event-log ")[1].split()[0]).parent.glob("*"))  # log removed


def test_a_failure_names_the_command_and_keeps_its_output(fake: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CODE", "255")
    with pytest.raises(pulumi.PulumiError, match=r"`pulumi up --yes` failed \(255\): error: up --yes") as err:
        pulumi.run(["up", "--yes"], binary=fake, check=True, on_output=lambda _l: None)
    assert err.value.output.startswith("Updating (dev)\n")
    with pytest.raises(pulumi.PulumiError, match=r"failed \(255\): error: stack export") as err:
        pulumi.run(["stack", "export"], binary=fake, check=True)  # captured, not streamed
    assert "Updating (dev)" in err.value.output
