"""Parsing preview JSON (streaming events and plain) and stack exports into records; masking."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from report.parse import (
    MASKED,
    SECRET_SIG,
    UNKNOWN,
    UNKNOWN_SENTINEL,
    PreviewParseError,
    diff_props,
    flatten,
    mask,
    parse_events,
    parse_export,
    parse_plain,
)
from tests.report.scenarios import FIXTURES

POD = "pulumi-python:dynamic/runpod:Pod"
SECRET = "pulumi-python:dynamic/runpod:Secret"


def events(scenario: str, stack: str) -> list[str]:
    return (FIXTURES / scenario / f"{stack}.events.jsonl").read_text().splitlines()


def load(path: Path) -> dict[str, object]:
    return json.loads(path.read_text())  # type: ignore[no-any-return]


def test_mask_hides_markers_placeholders_and_credential_named_plaintext() -> None:
    value = {
        "a": {SECRET_SIG: "1b47061264138c4ac30d75fd1eb44270", "ciphertext": "v1:abc"},
        "b": "[secret]",
        "env": {
            "HF_TOKEN": "hf_plaintextvalue",
            "WANDB_API_KEY": "0123456789abcdef",
            "REF_TOKEN": "{{ RUNPOD_SECRET_HF_TOKEN }}",
            "AWS_SECRET_ACCESS_KEY": "{{ RUNPOD_SECRET_trainstack-prod-aws_secret_access_key }}",
            "NUM_NODES": "8",
        },
    }
    assert mask(value) == {
        "a": MASKED,
        "b": MASKED,
        "env": {
            "HF_TOKEN": MASKED,
            "WANDB_API_KEY": MASKED,
            "REF_TOKEN": "{{ RUNPOD_SECRET_HF_TOKEN }}",
            "AWS_SECRET_ACCESS_KEY": "{{ RUNPOD_SECRET_trainstack-prod-aws_secret_access_key }}",
            "NUM_NODES": "8",
        },
    }


def test_flatten_uses_dotted_paths_and_keeps_scalar_lists_whole() -> None:
    props = {"__provider": "x", "env": {"A": "1"}, "ports": ["22/tcp"], "nodes": [{"rank": 0}], "e": {}}
    assert flatten(props) == {"env.A": "1", "ports": ["22/tcp"], "nodes[0].rank": 0, "e": {}}


def test_diff_marks_replace_reasons_and_unknowns() -> None:
    old = {"gpu_count": 4, "data_center_ids": ["A"], "volume_id": "v1", "same": 1}
    new = {"gpu_count": 8, "data_center_ids": ["B"], "volume_id": UNKNOWN_SENTINEL, "same": 1}
    changes = {c.path: c for c in diff_props(POD, old, new, ["data_center_ids"])}
    assert set(changes) == {"gpu_count", "data_center_ids", "volume_id"}
    assert changes["gpu_count"].before == "4" and changes["gpu_count"].after == "8"
    assert changes["data_center_ids"].forces_replace
    assert not changes["gpu_count"].forces_replace
    assert changes["volume_id"].after == UNKNOWN


def test_diff_never_shows_a_secret_resources_value_or_hash() -> None:
    old = {"name": "HF", "value_hash": "pbkdf2$1$aa$bb"}
    new = {"name": "HF", "value": "hf_plaintext_that_should_never_show", "value_hash": "pbkdf2$1$cc$dd"}
    shown = " ".join(f"{c.before} {c.after}" for c in diff_props(SECRET, old, new, []))
    assert "plaintext" not in shown and "pbkdf2" not in shown
    assert MASKED in shown


def test_diff_never_shows_a_nodes_secrets_file_values_or_hash() -> None:
    """delivery:SecretsFile (issue #67): the values and their hash are masked even if a preview shows them."""
    typ = "pulumi-python:dynamic/delivery:SecretsFile"
    old = {"pod_id": "p1", "values": {"DB_URL": "pg://old_plaintext"}, "values_hash": "hmac-sha256$aa$bb"}
    new = {"pod_id": "p2", "values": {"DB_URL": "pg://new_plaintext"}, "values_hash": "hmac-sha256$cc$dd"}
    shown = " ".join(f"{c.path} {c.before} {c.after}" for c in diff_props(typ, old, new, []))
    assert "plaintext" not in shown and "hmac" not in shown and "p2" in shown


def test_secret_named_as_replace_reason_shows_as_changed_even_though_masked() -> None:
    marker = {SECRET_SIG: "1b47061264138c4ac30d75fd1eb44270", "ciphertext": "x"}
    (change,) = diff_props(SECRET, {"value": marker}, {"value": marker}, ["value"])
    assert (change.before, change.after, change.forces_replace) == ('"[secret]"', '"[secret]"', True)


def test_streaming_events_give_steps_costs_and_violations() -> None:
    preview = parse_events(events("prod-over-budget", "prod"))
    ops = {c.name: c.op for c in preview.changes}
    assert ops == {"data": "same", "hf-token": "same", "train": "update"}
    train = next(c for c in preview.changes if c.name == "train")
    assert {c.path for c in train.changes} >= {"pod_count", "env.NUM_NODES", "cost_per_hour"}
    assert {v.policy for v in preview.violations} == {"hourly-burn-limit", "runpod-spend-limit"}
    assert {v.level for v in preview.violations} == {"mandatory"}
    assert all(v.resource is None for v in preview.violations)  # stack policies
    assert preview.failed
    assert preview.diagnostics == ()  # "preview failed" is dropped: the violations say why


def test_create_only_preview_has_no_before_state() -> None:
    preview = parse_events(events("dev-create", "dev"))
    assert {c.op for c in preview.changes} == {"create"}
    assert parse_export(load(FIXTURES / "dev-create/dev.export.json")) == ()
    assert preview.config_run_hours is None
    assert [c.run_hours for c in preview.after if c.name == "node-0"] == [2.0]


def test_replace_halves_collapse_into_one_replace() -> None:
    preview = parse_events(events("search-shrink", "search"))
    ops = sorted((c.name, c.op) for c in preview.changes)
    assert ops == [
        ("data", "replace"),
        ("hf-token", "same"),
        ("node-0", "update"),
        ("node-1", "update"),
        ("node-2", "delete"),
    ]
    assert "node-2" not in {c.name for c in preview.after}
    (data,) = [c for c in preview.changes if c.name == "data"]
    assert [(c.path, c.forces_replace) for c in data.changes] == [("data_center_id", True)]


def test_plain_json_agrees_with_the_event_stream() -> None:
    plain = parse_plain(load(FIXTURES / "search-shrink/search.preview.json"))
    streamed = parse_events(events("search-shrink", "search"))
    # The plain form leaves out some `same` steps (the report carries their cost over from the state).
    assert [c for c in plain.changes if c.op != "same"] == [c for c in streamed.changes if c.op != "same"]
    assert set(plain.after) <= set(streamed.after)
    assert plain.violations == ()  # the plain form carries no policy results


def test_export_reads_before_costs_and_skips_providers() -> None:
    before = parse_export(load(FIXTURES / "prod-scale-up/prod.export.json"))
    assert {c.name: c.cost_per_hour for c in before} == {"data": 0.0, "hf-token": 0.0, "train": 127.68}
    assert {c.name: c.run_hours for c in before}["train"] == 24.0


def test_config_run_hours_come_from_structured_stack_config() -> None:
    prelude = {"preludeEvent": {"config": {"trainstack:training": '{"max_run_hours":6}'}}}
    summary = {"summaryEvent": {"result": "succeeded"}}
    preview = parse_events([json.dumps(prelude), json.dumps(summary)])
    assert preview.config_run_hours == 6.0
    assert not preview.failed


@pytest.mark.parametrize(
    "lines",
    [["not json"], [json.dumps({"preludeEvent": {"config": {}}})]],
    ids=["garbage", "no-summary"],
)
def test_bad_event_streams_are_refused(lines: list[str]) -> None:
    with pytest.raises(PreviewParseError):
        parse_events(lines)


def test_bad_documents_are_refused() -> None:
    with pytest.raises(PreviewParseError):
        parse_plain({"hello": 1})
    with pytest.raises(PreviewParseError):
        parse_export({"version": 3})
