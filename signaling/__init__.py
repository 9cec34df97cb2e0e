"""Offer/answer over HTTP, the session registry and its limits, ICE config, auth tokens.

Knows SDP and HTTP, not models and not aiortc: sessions are created through the
`SessionFactory` protocol that `rtc_server` implements.
"""
