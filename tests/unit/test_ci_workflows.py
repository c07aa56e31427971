"""The GitHub workflows parse, and CI runs what the README promises on every push."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

WORKFLOWS = Path(__file__).resolve().parents[2] / ".github" / "workflows"


def _load(name: str) -> dict[Any, Any]:
    document = yaml.safe_load((WORKFLOWS / name).read_text(encoding="utf-8"))
    assert isinstance(document, dict), name
    return document


def _triggers(workflow: dict[Any, Any]) -> dict[str, Any]:
    # YAML 1.1 reads a bare ``on`` key as the boolean True.
    triggers = workflow.get("on", workflow.get(True))
    assert isinstance(triggers, dict)
    return triggers


def _runs(job: dict[str, Any]) -> list[str]:
    return [step["run"] for step in job["steps"] if "run" in step]


def _on_every_push(job: dict[str, Any]) -> bool:
    return "if" not in job


@pytest.mark.parametrize("name", sorted(path.name for path in WORKFLOWS.glob("*.yml")))
def test_every_workflow_parses_and_every_job_has_a_runner_and_steps(name: str) -> None:
    workflow = _load(name)
    assert _triggers(workflow)
    for job_id, job in workflow["jobs"].items():
        assert job.get("runs-on"), job_id
        assert job.get("steps"), job_id
        for step in job["steps"]:
            assert ("run" in step) != ("uses" in step), (job_id, step)


def test_ci_runs_on_every_push_and_pull_request() -> None:
    triggers = _triggers(_load("ci.yml"))
    assert "push" in triggers and triggers["push"] is None  # every branch, every tag
    assert "pull_request" in triggers and triggers["pull_request"] is None
    assert "schedule" in triggers


def test_ci_checks_and_tests_linux_on_every_push_with_the_packages_ci_run_installs() -> None:
    jobs = _load("ci.yml")["jobs"]
    every_push = [job for job in jobs.values() if _on_every_push(job)]
    commands = [command for job in every_push for command in _runs(job)]
    assert "./dev check" in commands
    tests = [job for job in every_push if any(c.startswith("./dev test") for c in _runs(job))]
    assert len(tests) == 1
    (linux,) = tests
    assert str(linux["runs-on"]).startswith("ubuntu")
    assert _runs(linux)[0] == ".ci/run packages"
    assert '-m "not packaging"' in _runs(linux)[-1]


def test_the_packaging_tests_run_nightly_and_on_demand_only() -> None:
    jobs = _load("ci.yml")["jobs"]
    packaging = [
        job
        for job in jobs.values()
        if any("./dev test -m packaging" in command for command in _runs(job))
    ]
    assert len(packaging) == 1
    condition = packaging[0]["if"]
    assert "schedule" in condition and "workflow_dispatch" in condition
    assert ".ci/run packages" in _runs(packaging[0])


def test_windows_and_macos_self_test_a_source_install_on_every_push() -> None:
    job = _load("ci.yml")["jobs"]["self-test"]
    assert _on_every_push(job)
    assert sorted(job["strategy"]["matrix"]["os"]) == ["macos-latest", "windows-latest"]
    lines = [line.strip() for command in _runs(job) for line in command.splitlines()]
    assert "python -m pip install -e ." in lines  # the runtime dependencies only
    assert any(line.startswith("maka ") and line.endswith(" self-test") for line in lines)
