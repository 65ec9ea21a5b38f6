"""YAML outage scenarios on a local cluster: schema, actions, observer, runner, report, plot."""
