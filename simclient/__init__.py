"""Simulated RocketMQ producers and push consumers over the real protocol (simclient/producer.py, simclient/consumer.py)."""

from simclient.consume_records import ConsumeRecord, consume_record_writer, read_consume_records
from simclient.consume_stats import ConsumeStats
from simclient.consumer import ConsumerOptions, OwnershipEvent, SimConsumer
from simclient.load import LoadSpec, LoadSummary, run_load
from simclient.pool import ClientPool
from simclient.producer import SimProducer
from simclient.producer_options import ProducerOptions
from simclient.records import OUTCOMES, RecordWriter, SendRecord, read_records
from simclient.stats import Histogram, RouteStats

__all__ = [
    "OUTCOMES",
    "ClientPool",
    "ConsumeRecord",
    "ConsumeStats",
    "ConsumerOptions",
    "Histogram",
    "LoadSpec",
    "LoadSummary",
    "OwnershipEvent",
    "ProducerOptions",
    "RecordWriter",
    "RouteStats",
    "SendRecord",
    "SimConsumer",
    "SimProducer",
    "consume_record_writer",
    "read_consume_records",
    "read_records",
    "run_load",
]
