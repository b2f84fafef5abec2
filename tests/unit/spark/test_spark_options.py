"""Small pieces of the Spark side: the worker daemon's path, the source's ``fields``,
the UI settings."""

from __future__ import annotations

import socket

import pytest

from skewlab.errors import ConfigError
from skewlab.spark.kafka_source import FIELDS, SCHEMA, KafkaSourceOptions, fields_schema
from skewlab.spark.pydaemon import strip_spark_zips
from skewlab.spark.session import LOOPBACK, ui_settings

pytestmark = pytest.mark.unit


def test_the_daemon_drops_only_sparks_zips_from_the_path():
    path = [
        "/x/pyspark/python/lib/pyspark.zip",
        "/x/pyspark/python/lib/py4j-0.10.9.9-src.zip",
        "/usr/lib/python311.zip",
        "/venv/site-packages",
    ]
    assert strip_spark_zips(path) == ["/usr/lib/python311.zip", "/venv/site-packages"]


def test_fields_keep_the_schema_order_and_reject_unknown_names():
    assert fields_schema(FIELDS) == SCHEMA
    opts = KafkaSourceOptions.from_options(
        {"bootstrap": "h:1", "topic": "t", "fields": "value, offset,partition"}
    )
    assert opts.fields == ("partition", "offset", "value")
    assert fields_schema(opts.fields) == "partition int, offset long, value binary"
    with pytest.raises(ConfigError, match="unknown"):
        KafkaSourceOptions.from_options({"bootstrap": "h:1", "topic": "t", "fields": "nope"})


def test_the_ui_gets_a_port_free_on_loopback_for_a_local_master():
    conf = ui_settings("local[2]", env={})
    assert conf["spark.ui.enabled"] == "true"
    port = int(conf["spark.ui.port"])
    with socket.socket() as sock:
        sock.bind((LOOPBACK, port))  # still free: nothing else took it
