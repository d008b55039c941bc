"""Bad options fail within seconds, before any Spark job, with one message naming the option and its value."""

from __future__ import annotations

import socket
import time
from typing import Any

import pytest

from kafkalite.embedded import EmbeddedCluster
from kafkalite.spark import KafkaliteDataSource
from kafkalite.spark.options import OptionError, sink_options, source_options

pytestmark = pytest.mark.spark


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def topic(cluster: EmbeddedCluster) -> str:
    cluster.create_topic("bad-input", 2, 3)
    return "bad-input"


CASES = {
    "no bootstrap servers": ({"kafka.bootstrap.servers": None, "subscribe": "bad-input"},
                             "kafka.bootstrap.servers=(missing)"),
    "two subscriptions": ({"subscribe": "bad-input", "subscribePattern": "bad-.*"},
                          "subscribePattern=bad-.*: set exactly one of subscribe, subscribePattern and assign; "
                          "subscribe=bad-input is set too"),
    "malformed JSON offsets": ({"subscribe": "bad-input", "startingOffsets": '{"bad-input": {"0": 1'},
                               "startingOffsets={\"bad-input\": {\"0\": 1: malformed JSON"),
    "a partition the topic lacks": ({"subscribe": "bad-input", "startingOffsets": '{"bad-input": {"7": 0}}'},
                                    "startingOffsets={\"bad-input\": {\"7\": 0}}: partition 7 of topic 'bad-input' "
                                    "does not exist"),
    "offsets that leave out a partition": ({"subscribe": "bad-input", "startingOffsets": '{"bad-input": {"0": 1}}'},
                                           "startingOffsets={\"bad-input\": {\"0\": 1}}: name every partition the "
                                           "query reads, as in Spark's Kafka source (missing: bad-input-1; -2 means "
                                           "earliest, -1 latest)"),
    "an assigned partition the topic lacks": ({"assign": '{"bad-input": [0, 5]}'},
                                              "assign={\"bad-input\": [0, 5]}: partition 5 of topic"),
    "an unknown failOnDataLoss": ({"subscribe": "bad-input", "failOnDataLoss": "maybe"},
                                  "failOnDataLoss=maybe: must be one of true, false"),
    "an unknown timestamp strategy": ({"subscribe": "bad-input", "startingOffsetsByTimestampStrategy": "newest"},
                                      "startingOffsetsByTimestampStrategy=newest: must be one of error, latest"),
    "an unknown starting position": ({"subscribe": "bad-input", "startingOffsets": "beginning"},
                                     "startingOffsets=beginning: must be \"earliest\", \"latest\" or JSON"),
    "an unreachable cluster": ({"kafka.bootstrap.servers": "127.0.0.1:{closed}", "subscribe": "bad-input"},
                               "kafka.bootstrap.servers=127.0.0.1:{closed}: the cluster cannot be reached"),
    "an illegal topic name": ({"subscribe": "bad-input,a b"},  # read nothing from it, as from a topic not created yet
                              "subscribe=bad-input,a b: Topic name 'a b' is illegal"),
}


@pytest.mark.parametrize("options, message", CASES.values(), ids=list(CASES))
@pytest.mark.parametrize("streaming", [False, True], ids=["batch", "stream"])
def test_bad_option_fails_at_load_before_any_job(spark: Any, cluster: EmbeddedCluster, topic: str,
                                                  options: dict[str, str | None], message: str,
                                                  streaming: bool) -> None:
    port = str(closed_port())
    options = {"kafka.bootstrap.servers": cluster.bootstrap_servers, **options}
    builder = (spark.readStream if streaming else spark.read).format("kafkalite")
    for name, value in options.items():
        if value is not None:
            builder = builder.option(name, value.replace("{closed}", port))
    context = spark.sparkContext
    context.setJobGroup("bad-input", "bad options must fail before any job")
    started = time.monotonic()
    with pytest.raises(Exception) as raised:
        builder.load()
    assert message.replace("{closed}", port) in str(raised.value)
    assert time.monotonic() - started < 20
    assert context.statusTracker().getJobIdsForGroup("bad-input") == []


def test_streaming_query_with_ending_offsets_fails_naming_the_option(spark: Any, cluster: EmbeddedCluster,
                                                                    topic: str) -> None:
    frame = spark.readStream.format("kafkalite").option("kafka.bootstrap.servers", cluster.bootstrap_servers) \
        .option("subscribe", topic).option("endingOffsets", "latest").load()
    query = frame.writeStream.format("noop").start()
    with pytest.raises(Exception, match="endingOffsets=latest: ending offsets apply to batch reads only"):
        query.awaitTermination(60)


def test_sink_without_a_topic_fails_naming_the_option(spark: Any, cluster: EmbeddedCluster) -> None:
    frame = spark.createDataFrame([("a",)], "value string")
    with pytest.raises(Exception, match=r"topic=\(missing\): set the topic option or give the DataFrame a topic"):
        frame.write.format("kafkalite").option("kafka.bootstrap.servers", cluster.bootstrap_servers) \
            .mode("append").save()


@pytest.mark.parametrize("options, message", [
    ({"subscribe": "t", "maxOffsetsPerTrigger": "0"}, "maxOffsetsPerTrigger=0: must be positive"),
    ({"subscribe": "t", "minOffsetsPerTrigger": "9", "maxOffsetsPerTrigger": "5"},
     "minOffsetsPerTrigger=9: must not exceed maxOffsetsPerTrigger (5)"),
    ({"subscribe": "t", "maxTriggerDelay": "soon"}, "maxTriggerDelay=soon: not a duration"),
    ({"subscribe": "t", "kafka.auto.offset.reset": "earliest"},
     "kafka.auto.offset.reset=earliest: not supported: set the source option startingOffsets instead"),
    ({"subscribe": "t", "kafka.max.poll.records": "many"}, "kafka.max.poll.records=many: Invalid value"),
    ({"subscribe": "t", "kafka.interceptor.classes": "a.B"},
     "kafka.interceptor.classes=a.B: not supported: kafkalite's clients have no interceptors"),
    ({"subscribePattern": " "}, "subscribePattern=' ': the pattern to subscribe to is empty"),
    ({"subscribe": "t", "maxTriggerDelay": ""}, "maxTriggerDelay='': not a duration"),
    ({"subscribe": "t", "maxOffsetsPerTrigger": "1_000"}, "maxOffsetsPerTrigger=1_000: not an integer"),
    ({"subscribe": "t", "minPartitions": "\u0663"}, "minPartitions=\u0663: not an integer"),  # an Arabic-Indic 3
    ({"subscribe": "t", "startingOffsets": '{"t": {"\u0663": 0}}'}, "is not in the shape"),
    ({"subscribe": "t", "startingTimestamp": "1_000"}, "startingTimestamp=1_000: not a timestamp"),
    ({"subscribe": "t", "startingOffsets": '{"t": {"0": -1}}'}, 'startingOffsets={"t": {"0": -1}}: offset -1 of t-0'),
    ({"assign": '{"t": "0"}'}, 'assign={"t": "0"}: topic \'t\' is not in the shape {"topic": [0, 1]}'),
    ({"subscribe": "t", "maxRecordsPerPartition": "0"}, "maxRecordsPerPartition=0: must be positive"),
    ({"subscribe": "t", "fetchOffset.numRetries": "-1"}, "fetchOffset.numRetries=-1: must be at least 0"),
    ({"subscribe": "t", "fetchOffset.retryIntervalMs": "soon"}, "fetchOffset.retryIntervalMs=soon: not an integer"),
    # values Spark cannot parse as its Long (Int for minPartitions), which failed deep in a lookup or were taken
    ({"subscribe": "t", "startingTimestamp": str(2**63)}, f"startingTimestamp={2**63}: a timestamp must be at most"),
    ({"subscribe": "t", "endingOffsetsByTimestamp": f'{{"t": {{"0": {2**63}}}}}'},
     f'endingOffsetsByTimestamp={{"t": {{"0": {2**63}}}}}: a timestamp must be at most {2**63 - 1} (partition t-0)'),
    ({"subscribe": "t", "startingOffsets": f'{{"t": {{"0": {2**63}}}}}'},
     f'startingOffsets={{"t": {{"0": {2**63}}}}}: offset {2**63} of t-0 is beyond the largest offset'),
    ({"subscribe": "t", "maxOffsetsPerTrigger": str(2**63)}, f"maxOffsetsPerTrigger={2**63}: must be at most"),
    ({"subscribe": "t", "minPartitions": str(2**31)}, f"minPartitions={2**31}: must be at most {2**31 - 1}"),
    ({"assign": '{"a b": [0]}'}, 'assign={"a b": [0]}: Topic name \'a b\' is illegal'),
    ({"assign": '{"__consumer_offsets": [0]}'},  # said partition 0 of it did not exist
     'assign={"__consumer_offsets": [0]}: topic \'__consumer_offsets\' is internal to the cluster and cannot be read'),
    ({"subscribe": "t, __consumer_offsets"},  # read nothing, silently
     "subscribe=t, __consumer_offsets: topic '__consumer_offsets' is internal to the cluster and cannot be read"),
    ({"subscribe": "t", "minPartitions": " 5"}, "minPartitions=' 5': not an integer"),  # Java's parseInt refuses it
    ({"assign": f'{{"t": [{2**31}]}}'}, f'assign={{"t": [{2**31}]}}: topic \'t\' is not in the shape'),
    ({"subscribe": "t", "startingOffsets": f'{{"t": {{"{2**31}": 0}}}}'}, "topic 't' is not in the shape"),
])
def test_option_checks_without_a_cluster(options: dict[str, str], message: str) -> None:
    """Checks that need no cluster, on the parsed options as a batch read gets them."""
    with pytest.raises(ValueError) as raised:
        source_options({"kafka.bootstrap.servers": "127.0.0.1:9092", **{k.lower(): v for k, v in options.items()}},
                       streaming=False)
    assert message in str(raised.value)


def test_kafka_settings_kafkalite_lacks_are_ignored_with_a_warning_as_spark_passes_them_on(
        caplog: pytest.LogCaptureFixture) -> None:
    """Spark hands every kafka.* option to Kafka's client, which warns of those it does not know; refusing them
    stopped pipelines that moved from Spark's Kafka source with settings of a real client, or with a consumer's
    setting in options shared between their read and their write."""
    source = source_options({"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "t",
                             "kafka.security.protocol": "PLAINTEXT", "kafka.max.poll.records": "7"}, streaming=True)
    assert source.client_config == {"max.poll.records": "7"}
    sink = sink_options({"kafka.bootstrap.servers": "127.0.0.1:9092", "topic": "t", "kafka.compression.type": "lz4",
                         "kafka.auto.offset.reset": "earliest", "kafka.linger.ms": "5"})
    assert sink.client_config == {"linger.ms": "5"}
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert "kafkalite option kafka.security.protocol=PLAINTEXT: kafkalite's client has no setting " \
           "security.protocol; ignored" in warned
    assert len(warned) == 3
    with pytest.raises(ValueError, match="kafka.value.serializer=x: not supported: the value column is written as "
                                         "bytes"):
        sink_options({"kafka.bootstrap.servers": "127.0.0.1:9092", "topic": "t", "kafka.value.serializer": "x"})
    assert source_options({"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "t",
                           "maxtriggerdelay": "1500us"}, streaming=True).max_trigger_delay_ms == 1


def test_a_batch_read_starting_past_the_end_blames_the_starting_offsets(cluster: EmbeddedCluster, topic: str) -> None:
    """Planning a batch read whose startingOffsets lie past a partition's end blamed endingOffsets=latest, an
    option the user never set, and spelled startingOffsets in lower case."""
    source = KafkaliteDataSource({"kafka.bootstrap.servers": cluster.bootstrap_servers, "subscribe": topic,
                                  "startingoffsets": '{"bad-input": {"0": 5, "1": 0}}'})  # lower-cased, as from Spark
    with pytest.raises(OptionError) as raised:
        source.reader(None).partitions()
    assert str(raised.value) == 'kafkalite option startingOffsets={"bad-input": {"0": 5, "1": 0}}: bad-input-0 would ' \
                                "start at 5, after its end at 0 (endingOffsets=latest)"
