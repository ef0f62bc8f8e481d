"""common/stack.py, the one client for a stack (issue #64): each verb's argv on the one runner, its answer as
a record, its failures as PulumiError naming the command, and the lock's owner read from Pulumi's refusal.
A fake CLI (a shell script) stands in for Pulumi: what is tested is the client, not the engine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from common.pulumi import PulumiError
from common.stack import Outcome, Stack, State, lock_owner

FAKE = """#!/bin/sh
echo "$*" >> "$ARGV_LOG"
case "$1 $2" in
  "stack output") echo '{"cost_per_hour": 1.5}' ;;
  "stack export") echo '{"version": 3, "deployment": {"resources": [{"urn": "urn:s"},
      {"urn": "urn:a", "id": "b-1", "type": "pulumi-python:dynamic/s3:CheckpointBucket"}]}}' ;;
  "stack ls") echo '[{"name": "dev"}, {"name": "prod"}]' ;;
  "up --yes")
    echo "error: the stack is currently locked by 1 lock(s): created by ci@box (pid 4242)" >&2
    exit 255 ;;
  "stack select") [ "$3" = "dev" ] || { echo "error: no stack named '$3' found" >&2; exit 255; } ;;
  *) echo "not json" ;;
esac
"""


@pytest.fixture
def stack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Stack:
    fake = tmp_path / "fake-cli"
    fake.write_text(FAKE)
    fake.chmod(0o755)
    monkeypatch.setenv("ARGV_LOG", str(tmp_path / "argv.log"))
    return Stack("dev", tmp_path, binary=str(fake))


def _argvs(stack: Stack) -> list[str]:
    return (stack.workspace / "argv.log").read_text().splitlines()


def test_the_readers_answer_records(stack: Stack) -> None:
    assert stack.outputs() == {"cost_per_hour": 1.5}
    state = stack.export()
    assert state.ids == {"b-1"} and state.urn_of("s3:CheckpointBucket") == "urn:a"
    assert stack.stacks() == ["dev", "prod"]
    assert _argvs(stack)[:2] == [
        f"stack output --json --stack dev --cwd {stack.workspace} --non-interactive",
        f"stack export --stack dev --cwd {stack.workspace} --non-interactive",
    ]
    assert _argvs(stack)[2] == f"stack ls --json --cwd {stack.workspace} --non-interactive"  # no stack named


def test_a_verb_answers_its_outcome_and_the_locks_owner(stack: Stack) -> None:
    done = stack.up("--yes", "--skip-preview")
    assert not done.ok and done.code == 255 and done.locked
    assert str(done.lock_owner) == "ci@box (pid 4242)"
    with pytest.raises(PulumiError, match=r"`pulumi up --yes` failed \(255\)") as raised:
        stack.up("--yes", check=True)
    assert raised.value.last.endswith("(pid 4242)")


def test_no_json_where_json_was_asked_is_a_pulumi_error(stack: Stack) -> None:
    with pytest.raises(PulumiError, match="printed no JSON") as raised:
        Stack("dev", stack.workspace, binary=stack.binary)._json(["config", "get"])
    assert raised.value.last == ""  # the command ran: no failing line to quote


def test_select_says_whether_the_stack_is_there(stack: Stack) -> None:
    assert stack.select() is True
    assert Stack("gone", stack.workspace, binary=stack.binary).select() is False
    assert _argvs(stack)[-1] == f"stack select gone --cwd {stack.workspace} --non-interactive"


def test_set_config_keeps_a_secret_off_the_command_line(stack: Stack) -> None:
    stack.set_config("trainstack:secrets.HF_TOKEN", secret=True, stdin="hf_value")
    stack.set_config("trainstack:alerts.interval_min", "0.25", path=True, kind="float")
    secret, plain = _argvs(stack)[-2:]
    assert "hf_value" not in secret and secret.startswith("config set --secret trainstack:secrets.HF_TOKEN")
    assert plain.startswith("config set --path --type float trainstack:alerts.interval_min --stack dev")
    assert plain.endswith("-- 0.25")


def test_the_records_read_what_pulumi_wrote() -> None:
    assert lock_owner("error: update failed") is None
    assert Outcome("pulumi up", 1, "", "error: a\nerror: b\n").last_line == "error: b"
    state = State({"version": 3, "deployment": {"resources": [{"urn": "u", "id": "x"}, "junk"]}})
    assert state.ids == {"x"} and json.dumps(dict(state.with_deployment({"resources": []}).exported))
