"""Training of the text-end probe (`python -m engines.turn.training`; engines/turn/text_end.py).

Kept apart from the runtime: a server never imports this package (tests/test_layers.py).
`corpus` has the bundled chat model write what users say, `data` makes the probe's examples
(each utterance whole, and cut at word boundaries), `train` reads them with the same model
(its last hidden state) and fits the logistic regression the server loads.
"""
