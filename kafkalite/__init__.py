"""kafkalite: a real, replicated Kafka cluster in one Python process."""

__version__ = "0.1.0"
