"""Scale-out: workers registered in Redis behind a signaling gateway.

- `config`: the `[cluster]` options.
- `signing`: HMAC-signed worker registrations and gateway-to-worker request tokens.
- `directory`: worker records, heartbeats with a TTL and the atomic slot reservation (Redis).
- `worker`: a media server that registers itself, takes offers only from the gateway, drains.
- `gateway`: the page, `/api/config` and `/api/offer` for the whole cluster; no media.
- `local`: starts the real pieces (redis-server, coturn, an LLM server, workers, gateway) on
  loopback for `make cluster`, the tests and `bench/cluster.py`.

The gateway imports neither aiortc nor a model.
"""
