"""A RocketMQ-compatible NameServer on trio."""
