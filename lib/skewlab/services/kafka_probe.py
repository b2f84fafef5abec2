"""Kafka health probes over a plain socket: is a Kafka broker answering on ``host:port``?

Two requests in Kafka's wire format (request header v1, no client library): ApiVersions
v0 (any Kafka answers it) and Metadata v4 (a KRaft broker lists itself once it is
registered and unfenced, so it serves metadata and creates topics).
"""

from __future__ import annotations

import socket
import struct

_API_VERSIONS = 18
_METADATA = 3
_METADATA_VERSION = 4
"""Metadata v4: the oldest version Kafka 4 still serves; not a flexible version."""


def _request(host: str, port: int, api: int, version: int, body: bytes, timeout_s: float) -> bytes:
    """One request (header v1) and the response after its size and correlation id."""
    client_id = b"skewlab-health"
    correlation = 0x5E3A
    header = struct.pack(">hhih", api, version, correlation, len(client_id)) + client_id
    payload = header + body
    with socket.create_connection((host, port), timeout=timeout_s) as sock:
        sock.sendall(struct.pack(">i", len(payload)) + payload)
        head = _recv_exact(sock, 8)
        size, got = struct.unpack(">ii", head)
        if got != correlation or not 4 <= size <= 1 << 24:
            raise OSError("not a Kafka response")
        return _recv_exact(sock, size - 4)


def kafka_api_versions_ok(host: str, port: int, timeout_s: float = 1.0) -> bool:
    """True if ``host:port`` answers a Kafka ApiVersions v0 request without error.

    Request: int32 size, int16 api_key=18, int16 api_version=0, int32 correlation id,
    int16-length client id. Response: int32 size, int32 correlation id, int16 error code, ...
    """
    try:
        rest = _request(host, port, _API_VERSIONS, 0, b"", timeout_s)
    except OSError:
        return False
    return len(rest) >= 2 and struct.unpack(">h", rest[:2])[0] == 0


def kafka_metadata_brokers(host: str, port: int, timeout_s: float = 1.0) -> int:
    """How many brokers a Metadata v4 request (no topics) lists; 0 if none or no answer.

    A KRaft broker lists itself only once it is registered and unfenced, that is, once
    it can serve metadata and create topics. Response v4: int32 throttle, then the
    brokers array (int32 count, ...).
    """
    body = struct.pack(">i?", 0, False)
    try:
        rest = _request(host, port, _METADATA, _METADATA_VERSION, body, timeout_s)
    except OSError:
        return 0
    if len(rest) < 8:
        return 0
    return max(0, int(struct.unpack(">i", rest[4:8])[0]))


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise OSError("connection closed mid-response")
        buf += chunk
    return buf
