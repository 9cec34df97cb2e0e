"""SmallWebRTC's request bodies, read as Pipecat's JS transport and request handler write
them: the offer (a superset of ours), the trickle PATCH and the `/start` tickets."""

from __future__ import annotations

import json
from typing import Any

import pytest

from signaling.errors import BadRequest, InvalidOffer
from signaling.smallwebrtc import (
    InvalidCandidate,
    StartTickets,
    parse_patch,
    parse_peer_offer,
    parse_start,
)

SDP = "v=0\r\no=- 1 1 IN IP4 0.0.0.0\r\ns=-\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\n" \
      "m=video 9 UDP/TLS/RTP/SAVPF 96\r\n"


def body(**fields: Any) -> bytes:
    return json.dumps({"sdp": SDP, "type": "offer", **fields}).encode()


def test_our_offer_and_the_js_transports_both_parse() -> None:
    ours = parse_peer_offer(body(portrait_id="p1"))
    assert (ours.pc_id, ours.restart, ours.offer.portrait_id) == (None, False, "p1")
    js = parse_peer_offer(body(pc_id="abc", restart_pc=True,
                               requestData={"portrait_id": "p2", "persona": "bank"}))
    assert (js.pc_id, js.restart) == ("abc", True)
    assert (js.offer.portrait_id, js.offer.persona) == ("p2", "bank")
    snake = parse_peer_offer(body(pc_id=None, restart_pc=None, request_data={"persona": "x"}))
    assert snake.pc_id is None and snake.offer.persona == "x"
    # a /start session's body is the request data when the offer brings none
    started = parse_peer_offer(body(), {"portrait_id": "p3"})
    assert started.offer.portrait_id == "p3"


@pytest.mark.parametrize(("fields", "fragment"), [
    ({"pc_id": 5}, "pc_id"), ({"pc_id": "x" * 200}, "pc_id"), ({"restart_pc": "yes"}, "restart"),
    ({"requestData": [1]}, "requestData"), ({"requestData": {"persona": 3}}, "persona"),
    ({"requestData": {"portrait_id": {}}}, "portrait_id"),
])
def test_bad_offer_fields(fields: dict[str, Any], fragment: str) -> None:
    with pytest.raises(InvalidOffer, match=fragment):
        parse_peer_offer(body(**fields))


def test_patch_reads_candidates_and_the_end_of_candidates_marker() -> None:
    patch = parse_patch(json.dumps({"pc_id": "abc", "candidates": [
        {"candidate": "candidate:1 1 udp 2122260223 127.0.0.1 50000 typ host",
         "sdp_mid": "0", "sdp_mline_index": 0},
        {"candidate": "", "sdp_mid": "0", "sdp_mline_index": 0},  # Firefox, per section
        {"candidate": None, "sdpMid": "1"},
    ]}).encode())
    assert patch.pc_id == "abc"
    assert [c.end_of_candidates for c in patch.candidates] == [False, True, True]
    assert patch.candidates[0].sdp_mid == "0" and patch.candidates[2].sdp_mid == "1"


@pytest.mark.parametrize(("data", "fragment"), [
    (b"", "empty"), (b"{", "JSON"), (b'{"candidates": []}', "pc_id"),
    (b'{"pc_id": "a", "candidates": {}}', "list"),
    (b'{"pc_id": "a", "candidates": [3]}', "object"),
    (b'{"pc_id": "a", "candidates": [{"candidate": "hello", "sdp_mid": "0"}]}', "SDP candidate"),
    (b'{"pc_id": "a", "candidates": [{"candidate": "candidate:1"}]}', "sdp_mid"),
    (b'{"pc_id": "a", "candidates": [{"candidate": "", "sdp_mline_index": -1}]}', "0..63"),
    (json.dumps({"pc_id": "a", "candidates": [{"candidate": ""}] * 65}).encode(), "at most"),
])
def test_bad_patches(data: bytes, fragment: str) -> None:
    with pytest.raises(InvalidCandidate, match=fragment):
        parse_patch(data)


def test_start_tickets_expire_are_bounded_and_used_once() -> None:
    now = [0.0]
    tickets = StartTickets(ttl_s=60, limit=2, clock=lambda: now[0])
    a, b = tickets.issue({"x": 1}), tickets.issue(None)
    assert tickets.holds(a) and tickets.take(a) == {"x": 1} and not tickets.holds(a)
    c = tickets.issue(None)
    d = tickets.issue(None)  # over the limit: the oldest (b) goes
    assert not tickets.holds(b) and tickets.holds(c) and tickets.holds(d)
    now[0] = 61.0
    assert len(tickets) == 0
    with pytest.raises(KeyError):
        tickets.take(c)


def test_start_body() -> None:
    assert parse_start(b"") is None
    assert parse_start(b'{"enableDefaultIceServers": true}') is None
    assert parse_start(b'{"body": {"persona": "bank"}}') == {"persona": "bank"}
    with pytest.raises(BadRequest):
        parse_start(b'{"body": 3}')
