"""Provider errors reach `pulumi up` users as their message; other exceptions keep their traceback."""

from __future__ import annotations

import traceback

from providers import display
from providers.errors import TrainstackError
from providers.runpod import errors


def _formatted(error: BaseException) -> str:
    fmt = display.message_or_traceback(traceback.format_exc)
    try:
        raise error
    except BaseException:
        return fmt()


def test_our_errors_show_their_message_only() -> None:
    error = errors.SpendLimitError("over the spend limit", status=400, method="POST", path="/v2/pods")
    assert _formatted(error) == "SpendLimitError: over the spend limit [POST /v2/pods -> HTTP 400]"


def test_other_errors_keep_the_traceback() -> None:
    text = _formatted(KeyError("bug"))
    assert text.startswith("Traceback (most recent call last)") and "KeyError" in text


def test_tests_and_programs_are_not_patched() -> None:
    assert not display.running_in_provider_host()
    assert not hasattr(traceback.format_exc, "__wrapped__")


def test_one_root_covers_every_provider_error() -> None:
    from providers.delivery.ssh import DeliveryError, UnreachableError
    from providers.s3.errors import BucketError

    assert display._user_facing == (TrainstackError,)  # one install, for the root
    for error in (DeliveryError("node 3: scp failed"), UnreachableError("node 3"), BucketError("refused")):
        assert _formatted(error) == f"{type(error).__name__}: {error}"
