"""Cluster errors, each an HTTP status and a stable code (mapped by signaling's middleware)."""

from __future__ import annotations

from signaling.errors import SignalingError


class DirectoryUnavailable(SignalingError):
    """Redis cannot be reached (or answered with an error)."""

    status = 503
    code = "directory_unavailable"


class ClusterUnauthorized(SignalingError):
    """A gateway->worker request without a valid, unexpired signature."""

    status = 401
    code = "cluster_unauthorized"


class WrongWorker(SignalingError):
    """A reservation or request signed for another worker."""

    status = 403
    code = "wrong_worker"


class GatewayRequired(SignalingError):
    """A worker takes offers only through the gateway."""

    status = 403
    code = "gateway_required"


class ReservationUsed(SignalingError):
    """A reservation token that was already used (a replayed offer)."""

    status = 409
    code = "reservation_used"


class Draining(SignalingError):
    """The worker finishes its sessions and takes no new ones."""

    status = 503
    code = "draining"


class WorkerUnreachable(SignalingError):
    """The reserved worker(s) did not answer."""

    status = 502
    code = "worker_unreachable"


class NotInCluster(SignalingError):
    """A single-process feature the gateway does not offer (portrait upload)."""

    status = 501
    code = "not_supported_in_cluster"


class NoWorkers(SignalingError):
    """No live worker is registered in the directory."""

    status = 503
    code = "no_workers"
