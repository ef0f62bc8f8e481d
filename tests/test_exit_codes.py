"""docs/CLI.md's one exit-code table: a bad input exits 2 with one line naming it and the fix, never a
traceback with the code a command gives its verdict (issue #62: `reconcile` exits 1 for "unowned resources
left", `supervise` for "an action failed"). Function calls: each refusal comes before any process or read."""

from __future__ import annotations

from pathlib import Path

import pytest

BAD_WEBHOOK = "https://hooks.example.invalid:99999/services/SECRETPART"


def test_reconcile_refuses_a_webhook_url_it_could_never_post_to(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from ops.reconcile import main

    monkeypatch.setenv("ALERT_WEBHOOK_URL", BAD_WEBHOOK)
    assert main([]) == 2
    err = capsys.readouterr().err
    assert err == "reconcile: not checked: ALERT_WEBHOOK_URL is not a URL; paste the webhook URL your chat " \
        "gives, https://...\n"  # fmt: skip


def test_supervise_refuses_a_webhook_url_it_could_never_post_to(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from supervisor.cli import main

    monkeypatch.setenv("ALERT_WEBHOOK_URL", BAD_WEBHOOK)
    assert main(["dev", "--cwd", str(tmp_path), "--once"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("scripts/supervise: ALERT_WEBHOOK_URL is not a URL") and err.count("\n") == 1
    assert "SECRETPART" not in err
