"""Data channel messages fit a 1280-byte MTU (IPv6's minimum; Tailscale and many VPNs).

Pipecat had to shrink aiortc's SCTP chunks: an older aiortc put 1200 bytes of user data in a
DATA chunk, which with SCTP, DTLS, UDP and IPv6 headers made ~1305-byte datagrams; on a
1280-MTU path the kernel refused them (EMSGSIZE), SCTP retransmitted the same size and the
data channel stalled for good. aiortc 1.16 caps an SCTP packet at 1189 bytes itself. This
checks what we actually send: every DTLS datagram of a session moving large RTVI messages
both ways (a 5 KB error event out, a 60 KB client message in) is sniffed on the loopback
interface, and none may carry more than 1232 bytes of UDP payload (1280 - 40 IPv6 - 8 UDP).
"""

from __future__ import annotations

import dataclasses
import json
import socket
import struct
import threading

import pytest

from rtc_server.rtvi.config import EmbedConfig
from testkit.smallwebrtc import SmallWebRTCPeer
from tests.support.server import SMALL_VIDEO, loopback_config, running_server

pytestmark = pytest.mark.webrtc
MTU = 1280
MAX_UDP_PAYLOAD = MTU - 40 - 8
ETH_P_ALL = 0x0003


class DtlsSniffer:
    """The UDP payload sizes of DTLS datagrams on `lo` (first byte 20..63, RFC 7983)."""

    def __init__(self) -> None:
        try:
            self._sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        except PermissionError:
            pytest.skip("sniffing the loopback interface needs root (CAP_NET_RAW)")
        self._sock.bind(("lo", 0))
        self._sock.settimeout(0.1)
        self.sizes: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> DtlsSniffer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sock.close()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                frame, (_, _, kind, _, _) = self._sock.recvfrom(65535)
            except TimeoutError:
                continue
            if kind == socket.PACKET_OUTGOING:  # on lo each datagram is seen twice
                continue
            if len(frame) < 14 + 20 + 8 or frame[12:14] != b"\x08\x00":
                continue
            ip = frame[14:]
            header = (ip[0] & 0x0F) * 4
            if ip[9] != socket.IPPROTO_UDP:
                continue
            (length,) = struct.unpack("!H", ip[header + 4 : header + 6])
            payload = ip[header + 8 :]
            if payload and 20 <= payload[0] <= 63:
                self.sizes.append(length - 8)


async def test_data_channel_datagrams_fit_a_1280_byte_mtu() -> None:
    config = dataclasses.replace(loopback_config(SMALL_VIDEO), embed=EmbedConfig())
    with DtlsSniffer() as sniffer:
        async with running_server(config) as (server, url):
            peer = SmallWebRTCPeer(url)
            await peer.connect()
            try:
                await peer.wait_rtvi("bot-ready", 5)
                session = next(iter(server.registry))
                session.report_error("big", RuntimeError("x" * 5000))  # type: ignore[attr-defined]
                out = await peer.wait_rtvi("error", 10, lambda m: "x" * 100 in m["data"]["error"])
                assert len(out["data"]["error"]) > 5000
                peer.send_raw(json.dumps({"label": "rtvi-ai", "type": "client-message",
                                          "id": "big", "data": {"t": "x", "d": "y" * 60_000}}))
                await peer.wait_rtvi("error-response", 10, lambda m: m.get("id") == "big")
            finally:
                await peer.close()
    assert sniffer.sizes, "no DTLS datagram seen on lo"
    largest = max(sniffer.sizes)
    print(f"largest DTLS datagram: {largest} bytes of UDP payload ({len(sniffer.sizes)} seen)")
    assert largest > 1000, f"the large messages were not fragmented into full chunks: {largest}"
    assert largest <= MAX_UDP_PAYLOAD, f"{largest} bytes of UDP payload: over a {MTU} MTU"
