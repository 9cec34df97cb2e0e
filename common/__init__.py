"""Pieces every layer may import: log set-up and the context logger (`logs`), and the face
geometry that the face model's outputs and the renderer share (`face_geometry`).

`common` imports nothing of ours; it holds no model and no I/O beyond logging.
"""
