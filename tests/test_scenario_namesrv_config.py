"""``cluster.namesrv_config`` in scenario files: NameServer properties the runner writes for every NameServer."""

from __future__ import annotations

import pytest

from mqadmin.scenario import runner
from mqadmin.scenario.schema import ScenarioError
from tests.test_scenario_schema import VALID, error_of, parse


def test_namesrv_config_is_parsed_and_passed_to_the_runner() -> None:
    scn = parse(VALID.replace("  brokers: 2\n", "  brokers: 2\n  namesrv_config:\n    warmRestartEnable: false\n"
                                               "    routeSnapshotIntervalMillis: 200\n", 1))
    assert scn.cluster.namesrv_config == (("warmRestartEnable", "false"), ("routeSnapshotIntervalMillis", "200"))
    assert runner.start_options(scn).namesrv_props == scn.cluster.namesrv_config
    assert parse(VALID).cluster.namesrv_config == ()


@pytest.mark.parametrize(("value", "expected"), [
    ("{warmRestart: false}", "s.yaml:7: cluster.namesrv_config: 'warmRestart' is not a NameServer config key"),
    ("{listenPort: 1}", "s.yaml:7: cluster.namesrv_config: listenPort is set by the runner"),
    ("{routeSnapshotPath: /tmp/x}", "s.yaml:7: cluster.namesrv_config: routeSnapshotPath: paths stay in"),
    ("{warmRestartEnable: maybe}", "s.yaml:7: cluster.namesrv_config: warmRestartEnable='maybe' is not true or false"),
    ("{routeSnapshotIntervalMillis: [1]}", "s.yaml:7: cluster.namesrv_config: routeSnapshotIntervalMillis must be a"),
    ("[warmRestartEnable]", "s.yaml:7: cluster.namesrv_config: must be a mapping"),
])
def test_bad_namesrv_config_is_one_line_naming_the_key(value: str, expected: str) -> None:
    text = VALID.replace("  brokers: 2\n", f"  brokers: 2\n  namesrv_config: {value}\n", 1)
    message = error_of(text)
    assert message.startswith(expected), message
    with pytest.raises(ScenarioError):
        parse(text)
