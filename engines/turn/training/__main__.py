"""`python -m engines.turn.training [corpus|probe]`: write the utterances (the bundled chat
model, ~15 min on 2 cores), then read them with the same model and fit the probe (~20 min;
`--features F` caches the hidden states)."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

import numpy as np

from engines.turn.text_end import PROBE_FILE

UTTERANCES = Path(__file__).resolve().parent / "utterances.txt"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=("corpus", "probe"))
    parser.add_argument("--model", help="the [llm] model (default: the bundled 1.5B GGUF)")
    parser.add_argument("--utterances", type=Path, default=UTTERANCES)
    parser.add_argument("--exclude", type=Path, action="append", default=[],
                        help="a file of texts never to train on (one a line)")
    parser.add_argument("--features", type=Path, help="cache of the hidden states (.npz)")
    parser.add_argument("--out", type=Path, default=PROBE_FILE)
    parser.add_argument("--device", default="cpu", help="where the model reads (cpu, cuda)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    if args.step == "corpus":
        from engines.turn.training.corpus import write

        n = write(args.utterances, args.model, args.exclude)
        logging.info("wrote %d utterances to %s", n, args.utterances)
        return
    from engines.turn.training.data import examples
    from engines.turn.training.train import hidden_states, load_model, train

    lines = args.utterances.read_text(encoding="utf-8").splitlines()
    data = examples([line for line in lines if line.strip()])
    net, tokenizer = load_model(args.model, args.device)
    if args.features is not None and args.features.is_file():
        features = np.load(args.features)["features"]
    else:
        features = hidden_states(net, tokenizer, [e.text for e in data])
        if args.features is not None:
            np.savez(args.features, features=features)
    labels = np.array([e.whole for e in data])
    groups = np.array([e.source for e in data])
    probe, report = train(features, labels, groups, net.model.embed_tokens.weight)
    probe.save(args.out)
    logging.info("probe: %d examples (%d whole), %s -> %s", len(data), int(labels.sum()),
                 report, args.out)


if __name__ == "__main__":
    main()
