"""The RTVI protocol on a client's data channel: what lets Pipecat's client SDKs (JavaScript,
React, React Native, iOS, Android, C++) embed the avatar unchanged.

`messages` builds and reads the messages (protocol 2.2.0, label `rtvi-ai`), `channel` is the
session's adapter (our events out, the client's messages in), `config` the `[embed]` section.
"""
