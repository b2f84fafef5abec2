"""The Spark driver listens on loopback only (issue 18), unless a setting says otherwise."""

from __future__ import annotations

import ipaddress

import psutil
import pytest

from skewlab.spark.session import BIND_ADDRESS_ENV, DRIVER_HOST_ENV, driver_address

pytestmark = pytest.mark.integration


def test_the_session_driver_host_and_bind_address_are_loopback(spark) -> None:
    conf = spark.sparkContext.getConf()
    assert conf.get("spark.driver.host") == "127.0.0.1"
    assert conf.get("spark.driver.bindAddress") == "127.0.0.1"


def loopback(ip: str) -> bool:
    addr = ipaddress.ip_address(ip)
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped  # ::ffff:127.0.0.1, how the JVM shows an IPv4 bind
    return addr.is_loopback


def listening_addresses(spark) -> list:
    """Every (ip, port) the session's JVM (and its children) listens on."""
    jvm = psutil.Process(spark.sparkContext._gateway.proc.pid)
    return [
        c.laddr
        for p in [jvm, *jvm.children(recursive=True)]
        for c in p.net_connections(kind="inet")
        if c.status == psutil.CONN_LISTEN
    ]


def test_every_port_the_spark_jvm_listens_on_is_loopback(spark) -> None:
    spark.range(10).count()  # the block manager and the RPC env are up
    listening = listening_addresses(spark)
    assert len(listening) >= 2  # the driver RPC and the block manager at least
    assert all(loopback(a.ip) for a in listening), listening


@pytest.mark.parametrize(
    ("master", "env", "expected"),
    [
        (
            "local[2]",
            {},
            {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"},
        ),
        (
            "local[*]",
            {BIND_ADDRESS_ENV: "0.0.0.0"},
            {
                "spark.driver.host": "127.0.0.1",
                "spark.driver.bindAddress": "0.0.0.0",
            },
        ),
        ("spark://master:7077", {}, {}),  # executors must reach the driver: Spark decides
        (
            "spark://master:7077",
            {DRIVER_HOST_ENV: "10.0.0.5"},
            {
                "spark.driver.host": "10.0.0.5",
                "spark.driver.bindAddress": "10.0.0.5",
            },
        ),
        ("yarn", {BIND_ADDRESS_ENV: "0.0.0.0"}, {"spark.driver.bindAddress": "0.0.0.0"}),
    ],
)
def test_driver_address_settings(master: str, env: dict, expected: dict) -> None:
    assert driver_address(master, env) == expected
