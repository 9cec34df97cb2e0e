"""Typed errors of the server process."""


class ServerError(Exception):
    """Base class of server errors."""


class ConfigError(ServerError, ValueError):
    """The configuration file or a command-line option is invalid."""
