"""An expectation's outcome: what was measured, against which target, and whether it passed.

Its own module because both judges make it (:mod:`mqadmin.scenario.expectations` for routes and
sends, :mod:`mqadmin.scenario.consumer_eval` for consumers) and the runner and reports read it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class Verdict:
    index: int
    kind: str
    text: str
    line: int
    passed: bool
    measured: float | None  # the number compared with the target (None: nothing to measure)
    measured_text: str
    target: str
    detail: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "kind": self.kind, "expectation": self.text, "line": self.line,
                "passed": self.passed, "measured": self.measured, "measuredText": self.measured_text,
                "target": self.target, "detail": self.detail}
