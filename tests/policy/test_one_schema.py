"""`python -m policy.config_file` and the policy pack judge a config by one schema (issue #49, class 2).

Three judges read the same settings: the checker (`problems_in`, what scripts/up and preview-report run),
the pack's own policies (`load_config`, the violation a preview reports) and the JSON schema the pack serves
the engine (generated from the same model). Over generated values for every key of every policy, the three
agree on valid or not, and the checker and the pack give the same line: `<policy>.<key>: <what>; <fix>`.
And when pulumi runs without our scripts, the pack itself refuses a bad file before the engine reads it
(`refuse_at_start`), with the checker's message.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policy.config_file import CONFIG_MODELS, passed_config, problems_in, refuse_at_start
from policy.rules.common import load_config
from tests.policy.factories import Reports
from tests.policy.test_bad_pack_config import BY_NAME, DEV_SETTINGS, served_schema

REPO = Path(__file__).resolve().parents[2]
PACK = REPO / "policy"
KEYS = sorted((name, key) for name, model in CONFIG_MODELS.items() if model for key in model.model_fields)

# JSON values of every type, the wrong ones a person writes (true for 1, "5" for 5) among them.
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**6), 10**6)
    | st.floats(allow_nan=False, allow_infinity=False, width=32)
    | st.sampled_from(["5", "LOW", "12.0", "", "true", "NVIDIA H100 80GB HBM3"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=2),
    max_leaves=4,
)


def _validate(policy: Any, entry: dict[str, Any]) -> Reports:
    """What the pack's policy does with its settings first, whatever resources it then reads."""
    reports = Reports()
    model = CONFIG_MODELS[policy.name]
    assert model is not None
    load_config(model, entry, reports)
    return reports


def _checker(name: str, value: dict[str, Any]) -> list[str]:
    return problems_in(json.dumps({name: value}), allow_unenforced_budget=True)


@given(st.sampled_from(KEYS), json_values)
@settings(max_examples=400, deadline=None)
def test_checker_pack_and_served_schema_agree(name_key: tuple[str, str], value: Any) -> None:
    name, key = name_key
    entry = {key: value}
    by_checker = _checker(name, entry)
    by_pack = _validate(BY_NAME[name], entry)
    by_schema = list(jsonschema.Draft7Validator(served_schema(BY_NAME[name])).iter_errors(entry))
    verdicts = (bool(by_checker), "policy config is invalid" in by_pack.text, bool(by_schema))
    assert len(set(verdicts)) == 1, (name, key, value, by_checker, by_pack.text, by_schema)
    for line in by_checker:  # the same words, whichever judge says them
        assert line.startswith(f"{name}.{key}") and line in by_pack.text, (line, by_pack.text)


@pytest.mark.parametrize(
    ("name", "entry", "words"),
    [
        ("run-cost-within-budget", {"max_run_cost_usd": True}, "write a number, without quotes"),
        ("model-fits-gpu-memory", {"min_headroom_gb": "5"}, "write a number, without quotes"),
        ("run-fits-max-hours", {"max_restarts": 1.5}, "write a whole number"),
        ("allowed-gpu-types", {"allowed_gpu_types": "NVIDIA H100 NVL"}, "write a list"),
        ("capacity-available", {"warn_below": "low"}, "use one of the values named"),
        ("volume-same-data-center", {"require_pinned": "yes"}, "write true or false"),
        ("min-cuda-version", {"lowest_min_cuda_version": 12.0}, "write a string in double quotes"),
    ],
)
def test_the_issue_examples_are_refused_by_both_with_key_and_fix(
    name: str, entry: dict[str, Any], words: str
) -> None:
    (line,) = _checker(name, entry)
    assert line.startswith(f"{name}.{next(iter(entry))}: ") and words in line, line
    assert line in _validate(BY_NAME[name], entry).text


def test_what_the_engine_hands_the_pack_is_read_as_the_file_says() -> None:
    """Every number reaches the pack as a double (protobuf Struct): 0.0 for `max_restarts: 0` is no error."""
    assert _validate(BY_NAME["run-fits-max-hours"], {"max_restarts": 0.0}).text == ""
    assert _checker("run-fits-max-hours", {"max_restarts": 0}) == []
    for name, entry in DEV_SETTINGS.items():
        assert "policy config is invalid" not in _validate(BY_NAME[name], entry).text, name


@pytest.fixture
def cli_like(tmp_path: Path) -> Any:
    """A process whose arguments are a pulumi command's, as the pack's ancestor would be."""
    started: list[subprocess.Popen[bytes]] = []

    def start(*args: str) -> int:
        child = subprocess.Popen(
            [sys.executable, "-c", "import sys; print('ready', flush=True); sys.stdin.read()", *args],
            cwd=tmp_path, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        )  # fmt: skip
        started.append(child)
        assert (
            child.stdout is not None and child.stdout.readline() == b"ready\n"
        )  # its arguments are readable
        return child.pid

    yield start
    for child in started:
        child.kill()
        child.wait(timeout=10)


BAD_FILES: dict[str, tuple[str | bytes, str]] = {
    "unknown policy": ('{"no-such-policy": {}}', "no-such-policy: no policy of that name"),
    "wrong type": ('{"hourly-burn-limit": {"max_hourly_usd": "40"}}', "hourly-burn-limit.max_hourly_usd"),
    "key twice": ('{"hourly-burn-limit": {"max_hourly_usd": 1, "max_hourly_usd": 900}}', "is given twice"),
    "budget off": ('{"run-cost-limit": "disabled"}', "turns off a budget policy"),
    # Issue #62: both raised out of the pack (and of `python -m policy.config_file`) with a traceback.
    "not utf-8": (b'{"hourly-burn-limit": {"max_hourly_usd": 1}, "\xff": {}}', "UTF-8 text (byte 0xff"),
    "nested 200,000 deep": ("[" * 200_000 + "]" * 200_000, "is nested deeper than Python's parser goes"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_the_pack_refuses_a_bad_file_before_the_engine_reads_it(
    case: str, cli_like: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text, words = BAD_FILES[case]
    if isinstance(text, bytes):
        (tmp_path / "bad.json").write_bytes(text)
    else:
        (tmp_path / "bad.json").write_text(text)
    pid = cli_like("preview", "--policy-pack", str(PACK), "--policy-pack-config", "bad.json")
    assert passed_config(PACK, pid) == tmp_path / "bad.json"
    with pytest.raises(SystemExit) as stopped:
        refuse_at_start(PACK, pid)
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / 'bad.json'}: " in err and words in err, err
    assert "Traceback" not in err


def test_the_pack_starts_on_a_good_file_and_pairs_configs_with_packs(
    cli_like: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "good.json").write_text((REPO / "policy/config/dev.json").read_text())
    (tmp_path / "bad.json").write_text("{")
    pid = cli_like("up", f"--policy-pack={tmp_path}", "--policy-pack-config=bad.json",
                   "--policy-pack", str(PACK), "--policy-pack-config", "good.json")  # fmt: skip
    assert passed_config(PACK, pid) == tmp_path / "good.json"
    refuse_at_start(PACK, pid)  # returns: nothing to refuse
    assert capsys.readouterr().err == ""
    assert passed_config(PACK, cli_like("preview")) is None  # no config given: the engine's defaults


@pytest.mark.parametrize("case", ["not utf-8", "nested 200,000 deep"])
def test_the_checker_scripts_up_runs_first_says_one_line_per_file(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue #62: `scripts/up` runs `python -m policy.config_file` before anything; both raised out of it."""
    from policy import config_file

    text, words = BAD_FILES[case]
    path = tmp_path / "bad.json"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    assert config_file.main([str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"{path}: (file): ") and words in err and err.count("\n") == 1, err
