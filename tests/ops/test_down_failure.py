"""`scripts/down` on the local demo says why it failed and the way out (issue #62): after the local S3 lost
the demo's bucket it said only "`pulumi up --target` failed (1): Duration: 1s", and a read-only shell got the
same. A stand-in program plays `pulumi` (`binary=`), printing what Pulumi v3.274.1 printed for an update whose
provider raised: no engine boots."""

from __future__ import annotations

import functools
import json
import sys
import textwrap
from pathlib import Path

import pytest

from common import pulumi
from common.stack import Stack
from ops import workflow
from scripts.cli import main as trainstack

CAUSE = (
    "BucketError: cannot update the checkpoint bucket: S3 answered PutBucketVersioning with NoSuchBucket "
    "(the bucket is gone); refresh the stack (scripts/recover STACK runs `pulumi refresh`), which drops it "
    "from the state, then run the command again"
)
# The shape of a real `pulumi up` whose dynamic provider raised (v3.274.1; the provider's message is ours).
FAILED_UP = textwrap.dedent(
    f"""\
    Updating (prod):

    @ updating....
     ~  pulumi-python:dynamic/s3:CheckpointBucket checkpoints updating (0s) error: Traceback (most recent...
     ~  pulumi-python:dynamic/s3:CheckpointBucket checkpoints **updating failed** error: Traceback (most...
        pulumi:pulumi:Stack trainstack-prod  error: update failed
        pulumi:pulumi:Stack trainstack-prod **failed** 1 error
    Diagnostics:
      pulumi:pulumi:Stack (trainstack-prod):
        error: update failed

      pulumi-python:dynamic/s3:CheckpointBucket (checkpoints):
        error: Traceback (most recent call last):
          File "/repo/.venv/lib/python3.11/site-packages/pulumi/dynamic/__main__.py", line 84, in wrapper
            return fn(self, request, context)
          File "/repo/providers/s3/bucket.py", line 140, in update
            raise BucketError(...)
        {CAUSE}

    Resources:
        2 unchanged

    Duration: 1s
    """
)  # fmt: skip
EXPORT = {
    "deployment": {"resources": [{"urn": "urn:pulumi:prod::trainstack::b", "type": "s3:CheckpointBucket"}]}
}


@pytest.fixture
def fake(tmp_path: Path) -> str:
    (tmp_path / "up.txt").write_text(FAILED_UP)
    script = tmp_path / "fake-pulumi"
    script.write_text(
        f"#!{sys.executable}\nimport sys\nargs = sys.argv[1:]\n"
        f"if args[:2] == ['stack', 'export']:\n    print({json.dumps(json.dumps(EXPORT))})\n"
        f"elif args[:1] == ['up']:\n"
        f"    print(open({str(tmp_path / 'up.txt')!r}).read(), end='')\n    sys.exit(1)\n"
    )
    script.chmod(0o755)
    return str(script)


def test_a_failed_command_names_pulumis_cause_not_its_duration(fake: str, tmp_path: Path) -> None:
    with pytest.raises(pulumi.PulumiError) as err:
        Stack("prod", tmp_path, binary=fake).up("--target", "urn", "--yes", check=True)
    assert str(err.value) == f"`pulumi up --target` failed (1): {CAUSE}"
    with pytest.raises(pulumi.PulumiError, match="NoSuchBucket"):
        pulumi.run(["up", "--yes"], binary=fake, check=True)  # the runner's own check says the same


def test_down_says_the_cause_and_the_way_out_when_the_local_s3_lost_the_bucket(
    fake: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(workflow, "Stack", functools.partial(Stack, binary=fake))
    monkeypatch.setattr("ops.local_demo.apply", lambda *_args: None)
    assert workflow._unguard_local_copy("scripts/down", "prod", tmp_path) is False
    err = capsys.readouterr().err
    said = (
        "scripts/down: letting the destroy delete the demo's checkpoint bucket failed: `pulumi up --target`"
    )
    assert f"{said} failed (1): {CAUSE}\n" in err
    assert "scripts/recover prod refreshes the state" in err and "Duration" not in err


def test_a_read_only_down_is_refused_before_anything(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TRAINSTACK_READ_ONLY", "1")

    def never(*_args: str) -> None:
        raise AssertionError("a read-only down went on to set up")

    monkeypatch.setattr(workflow, "bootstrap", never)
    assert trainstack(["down", "dev"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("scripts/down: refused: TRAINSTACK_READ_ONLY=1") and err.count("\n") == 1
