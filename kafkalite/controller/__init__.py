"""The controller: election, partition and replica state machines, leader selectors, request batches."""

from kafkalite.controller.controller import KafkaController

__all__ = ["KafkaController"]
