"""The server process: config, logging, metrics, sessions, and the wiring of engines to media.

Importing this package is cheap (no aiortc); submodules import what they need.
"""
