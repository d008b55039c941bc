"""Apache Kafka's wire protocol: the KAFKA listener, so that Kafka's own clients use kafkalite unchanged.

One module per API key, each opening with the versions it serves and how it behaves, each a thin translation
to and from the native request types that `KafkaApis` serves: the KAFKA listener is one more front door to the
same broker, and nothing about replication, the controller or the log is duplicated here. `apis` is the
dispatch table, `wire` the per-frame protocol a listener runs, `protocol` the only module that touches the
codec (kafka-python's generated message classes).
"""
