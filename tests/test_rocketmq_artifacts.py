"""``mqadmin rocketmq fetch``/``list`` and the artifact cache, with the real CLI, the real Maven and Java.

Each test has a cache of its own (MQADMIN_CACHE_DIR); Maven's own ~/.m2 is the machine's, warm after the
interop harness build, so a resolution here takes Maven's offline path.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from mqadmin.rocketmq.artifacts import ArtifactError, cached, check_version
from tests.mqadmin_procs import cli_env, mqadmin


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    return tmp_path / "cache"


def env_with(cache: Path, path: str | None = None) -> dict[str, str]:
    env = cli_env(MQADMIN_CACHE_DIR=str(cache))
    if path is not None:
        env["PATH"] = path
    return env


def only(tmp_path: Path, *tools: str) -> str:
    """A PATH holding just these tools (links to the machine's), to take one away."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for tool in tools:
        found = shutil.which(tool)
        assert found, f"{tool} is needed on this machine"
        (bin_dir / tool).symlink_to(os.path.realpath(found))
    return str(bin_dir)


def test_fetch_resolves_into_the_cache_and_the_next_use_needs_no_maven(cache: Path, tmp_path: Path) -> None:
    first = mqadmin("rocketmq", "fetch", "5.3.3", "--components", "server", "--json", env=env_with(cache),
                    in_process=False, timeout=900)
    assert first.returncode == 0, first.stderr
    row = json.loads(first.stdout)["components"][0]
    assert row["component"] == "server" and row["fresh"] is True and row["jars"] > 50
    listing = (cache / "rocketmq" / "5.3.3" / "server" / "classpath.txt").read_text().strip().split(os.pathsep)
    names = {Path(jar).name for jar in listing}
    assert {"rocketmq-broker-5.3.3.jar", "rocketmq-namesrv-5.3.3.jar", "rocketmq-tools-5.3.3.jar"} <= names
    # Without Maven on PATH the cached classpath is used as it is.
    again = mqadmin("rocketmq", "fetch", "5.3.3", "--components", "server", env=env_with(cache, only(tmp_path, "java")),
                    in_process=False)
    assert again.returncode == 0, again.stderr
    assert "already cached" in again.stdout
    listed = mqadmin("rocketmq", "list", "--json", env=env_with(cache))
    assert listed.returncode == 0
    assert [(r["version"], r["component"]) for r in json.loads(listed.stdout)["components"]] == [("5.3.3", "server")]


def test_a_cache_whose_jars_are_gone_is_resolved_again(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MQADMIN_CACHE_DIR", str(cache))
    listing = cache / "rocketmq" / "5.3.3" / "server" / "classpath.txt"
    listing.parent.mkdir(parents=True)
    listing.write_text(str(cache / "gone.jar"))
    assert cached("5.3.3", "server") is None


@pytest.mark.parametrize(("args", "expected"), [
    (["9.9.9", "--components", "server"],
     "RocketMQ 9.9.9 is not published on Maven Central (org.apache.rocketmq:rocketmq-namesrv"),
    (["abc"], "RocketMQ version 'abc' is not a version number like 5.3.3"),
    (["4.9.7", "--components", "proxy"], "RocketMQ 4.9.7 has no proxy: it exists from 5.0.0 on"),
    (["5.3.3", "--components", "broker"], "unknown RocketMQ component 'broker'"),
])
def test_a_version_that_cannot_be_had_is_one_line_and_exit_2(cache: Path, args: list[str], expected: str) -> None:
    done = mqadmin("rocketmq", "fetch", *args, env=env_with(cache), in_process=False, timeout=900)
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("mqadmin:")]
    assert len(lines) == 1 and expected in lines[0], done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(("tools", "missing"), [(("java",), "mvn not found on PATH"), ((), "java not found on PATH")])
def test_a_missing_tool_is_named_with_exit_2(cache: Path, tmp_path: Path, tools: tuple[str, ...], missing: str) -> None:
    done = mqadmin("rocketmq", "fetch", "5.3.3", "--components", "server",
                   env=env_with(cache, only(tmp_path, *tools)), in_process=False)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].startswith(f"mqadmin: {missing}"), done.stderr


def test_version_rules() -> None:
    assert check_version("5.4.0-rc1") == "5.4.0-rc1"
    with pytest.raises(ArtifactError):
        check_version("5.3")
