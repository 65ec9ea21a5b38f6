"""A broker process that registers like a RocketMQ broker and serves real producers."""
