"""Training of the audio-to-landmark model (`python -m engines.face.training`).

Kept apart from the runtimes: a server never imports this package (tests/test_layers.py checks
that). `corpus` holds the sentences, `visemes` turns phoneme timings into landmark targets,
`data` synthesizes and caches the training speech, `train` fits `engines.face.model` and
exports the shipped ONNX file. The architecture (`engines/face/model.py`) stays with the
runtimes: the torch runtime builds it from the ONNX file's weights.
"""
