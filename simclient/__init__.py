"""Simulated RocketMQ producers over the real protocol (see simclient/producer.py)."""

from simclient.load import LoadSpec, LoadSummary, run_load
from simclient.pool import ClientPool
from simclient.producer import ProducerOptions, SimProducer
from simclient.records import OUTCOMES, RecordWriter, SendRecord, read_records
from simclient.stats import Histogram, RouteStats

__all__ = [
    "OUTCOMES",
    "ClientPool",
    "Histogram",
    "LoadSpec",
    "LoadSummary",
    "ProducerOptions",
    "RecordWriter",
    "RouteStats",
    "SendRecord",
    "SimProducer",
    "read_records",
    "run_load",
]
