"""`[asr] runtime = "torch"` (engines/asr/torch_whisper.py): Whisper base from the CTranslate2
weights in PyTorch on the CPU hears what the CTranslate2 runner hears.

The two runners differ in arithmetic (torch float32 against CTranslate2 int8), so a word
may differ on some clip: the texts are compared after normalisation and may differ on one
sentence of five, and the torch runner's word error rate may exceed CTranslate2's by at most
one word in these 50. Measured on 32 English clips (27 piper, 5 espeak-ng): 31 texts the
same after normalisation ("July 21." against "July 21st."), the same WER; no-speech
probabilities within 0.053, average log-probabilities within 0.025, sentence-end
probabilities within 0.08 where the texts matched. On 8 Kokoro Mandarin clips the same CER,
"zh" detected on all 8.
"""

from __future__ import annotations

import logging
import threading

import numpy as np
import pytest
import torch

from engines.asr import AsrConfig
from engines.asr.errors import AsrModelLoadError, InvalidAsrConfigError
from engines.asr.offline import listen
from engines.asr.streaming import WhisperStreamingASR
from engines.asr.text import char_error_rate, normalize_words, word_error_rate
from engines.asr.torch_whisper import TorchWhisperRunner, _placement
from engines.asr.whisper import WhisperModelRunner
from engines.asr.whisper_graphs import WhisperGraphs
from testkit.sentences import spoken_reference
from testkit.speech import synth
from tests.engines.test_asr import SENTENCES

SR = 16000
QUESTION = "How far is the nearest train station from here?"
ZH_QUESTION = "中国的首都是哪个城市？"


def clip(text: str) -> np.ndarray:
    """0.3 s lead, the speech, 0.6 s of silence (as the pause decode sees it)."""
    return np.concatenate([np.zeros(int(0.3 * SR), np.int16), synth(text),
                           np.zeros(int(0.6 * SR), np.int16)])


@pytest.fixture(scope="module")
def torch_runner() -> TorchWhisperRunner:
    return TorchWhisperRunner(AsrConfig(runtime="torch"))


@pytest.fixture(scope="module")
def static_runner() -> TorchWhisperRunner:
    """The CUDA graphs' path on the CPU: their bodies run eagerly on the static buffers."""
    return TorchWhisperRunner(AsrConfig(runtime="torch", num_workers=2), static=True)


@pytest.fixture(scope="module")
def ct2_runner() -> WhisperModelRunner:
    return WhisperModelRunner(AsrConfig())


@pytest.mark.slow
def test_torch_hears_what_ctranslate2_hears(
    torch_runner: TorchWhisperRunner, ct2_runner: WhisperModelRunner
) -> None:
    texts = {name: [r.accept(r.decode(clip(s))) for s in SENTENCES]
             for name, r in (("torch", torch_runner), ("ct2", ct2_runner))}
    same = sum(normalize_words(a) == normalize_words(b)
               for a, b in zip(texts["torch"], texts["ct2"], strict=True))
    assert same >= len(SENTENCES) - 1, texts
    words = sum(len(s.split()) for s in SENTENCES)
    wer = {name: word_error_rate(list(SENTENCES), hyps) for name, hyps in texts.items()}
    assert wer["torch"] <= wer["ct2"] + 1 / words, (wer, texts)


@pytest.mark.slow
def test_scores_are_ctranslate2s(
    torch_runner: TorchWhisperRunner, ct2_runner: WhisperModelRunner
) -> None:
    """The no-speech probability, the average log-probability and the sentence-end
    probability are the quantities CTranslate2 reports, not look-alikes."""
    audio = clip(QUESTION)
    ours, theirs = torch_runner.decode(audio), ct2_runner.decode(audio)
    assert ours.text == theirs.text == QUESTION
    assert ours.end_probability > 0.5  # a complete question, "?" at the end
    assert abs(ours.end_probability - theirs.end_probability) < 0.1
    assert abs(ours.avg_logprob - theirs.avg_logprob) < 0.05
    assert abs(ours.no_speech_prob - theirs.no_speech_prob) < 0.05


@pytest.mark.slow
def test_silence_is_no_speech(torch_runner: TorchWhisperRunner) -> None:
    decoded = torch_runner.decode(np.zeros(2 * SR, np.int16))
    assert decoded.no_speech_prob > 0.6  # Whisper writes "you" here, and scores it as noise
    assert torch_runner.accept(decoded) == ""


@pytest.mark.slow
def test_concurrent_decodes_match_sequential_ones(torch_runner: TorchWhisperRunner) -> None:
    clips = [clip(s) for s in SENTENCES[1:4]]
    alone = [torch_runner.decode(c).text for c in clips]
    together: dict[int, str] = {}

    def run(k: int) -> None:
        together[k] = torch_runner.decode(clips[k]).text

    threads = [threading.Thread(target=run, args=(k,)) for k in range(len(clips))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [together[k] for k in range(len(clips))] == alone


@pytest.mark.slow
def test_mandarin_is_detected_and_heard() -> None:
    """language "auto": the language token from the first decoder step, then the Simplified
    prompt of "zh" (the same Kokoro voice and question as tests/test_agent_zh.py)."""
    runner = TorchWhisperRunner(AsrConfig(runtime="torch", language="auto"))
    audio = np.concatenate([np.zeros(SR // 2, np.int16), synth(ZH_QUESTION, "kokoro",
                                                               voice="zm_yunxi"),
                            np.zeros(SR // 2, np.int16)])
    decoded = runner.decode(audio)
    heard = runner.accept(decoded)
    assert decoded.language == "zh", decoded
    assert char_error_rate([spoken_reference(ZH_QUESTION)], [spoken_reference(heard)]) <= 0.3


@pytest.mark.slow
def test_tiny_en_loads_and_refuses_chinese() -> None:
    with pytest.raises(AsrModelLoadError, match="English-only"):
        TorchWhisperRunner(AsrConfig(model="tiny.en", runtime="torch", language="zh"))
    runner = TorchWhisperRunner(AsrConfig(model="tiny.en", runtime="torch"))
    assert not runner.multilingual
    assert word_error_rate([QUESTION], [runner.accept(runner.decode(clip(QUESTION)))]) <= 0.15


@pytest.mark.slow
def test_the_stream_hears_a_question_through_listen() -> None:
    """`WhisperStreamingASR` picks the torch runner by `runtime`; the offline hearing loop
    (endpointer, partials, pause and final decodes) drives it as the server would."""
    asr = WhisperStreamingASR(AsrConfig(runtime="torch"))
    assert isinstance(asr.runner, TorchWhisperRunner)
    audio = np.concatenate([np.zeros(SR // 2, np.int16), synth(QUESTION),
                            np.zeros(2 * SR, np.int16)])
    heard = listen(audio, asr)
    assert len(heard) == 1 and heard[0].reason != "open"
    assert word_error_rate([QUESTION], [heard[0].text]) == 0.0, heard[0].text


def test_runtime_is_validated() -> None:
    with pytest.raises(InvalidAsrConfigError, match="runtime"):
        AsrConfig(runtime="bogus")
    with pytest.raises(InvalidAsrConfigError, match="greedily"):
        AsrConfig(runtime="torch", beam_size=2)


def test_decodes_count_as_device_calls_on_a_gpu_only(static_runner: TorchWhisperRunner) -> None:
    """The server sizes its ASR threads by it (rtc_server/engine_set.py): on the CPU a
    decode is CPU work, on a GPU each of `num_workers` graph sets may run beside the others."""
    on_gpu = static_runner.model.device.type == "cuda"
    assert static_runner.device_calls == (2 if on_gpu else 0)


@pytest.mark.skipif(torch.cuda.is_available(), reason="torch sees a GPU")
def test_cuda_without_cuda_stops_start_up(caplog: pytest.LogCaptureFixture) -> None:
    with pytest.raises(AsrModelLoadError, match=r"torch.cuda.is_available\(\) is False"):
        TorchWhisperRunner(AsrConfig(runtime="torch", device="cuda"))
    with caplog.at_level(logging.WARNING, logger="engines.asr.torch_whisper"):
        device, dtype = _placement("auto")
    assert (device.type, dtype) == ("cpu", torch.float32)
    assert "decoding on the CPU" in caplog.text


@pytest.mark.slow
def test_beam_search_is_refused_per_call(torch_runner: TorchWhisperRunner) -> None:
    with pytest.raises(InvalidAsrConfigError, match="greedily"):
        torch_runner.decode(np.zeros(SR, np.int16), beam_size=2)


@pytest.mark.slow
def test_the_graphs_decode_as_the_eager_search_does(
    torch_runner: TorchWhisperRunner, static_runner: TorchWhisperRunner
) -> None:
    """whisper_graphs.py without the capture: keys and values kept for the longest window with
    the rest masked, the prompt's and the step's bodies, the tokens read every few steps.
    Short and long windows (a 4-sentence clip: a 20 s window after a 5 s one, so the buffers
    hold a longer window's frames when a shorter one follows), and silence."""
    clips = [clip(s) for s in SENTENCES[:4]]
    clips.insert(2, np.concatenate([clip(s) for s in SENTENCES[4:8]]))
    clips.append(np.zeros(2 * SR, np.int16))
    windows = static_runner._window_frames()  # noqa: SLF001 - what the graphs are captured for
    for audio in clips:
        assert static_runner._window(audio)[0].shape[1] in windows  # noqa: SLF001
        eager, static = torch_runner.decode(audio), static_runner.decode(audio)
        assert static.text == eager.text
        assert static.avg_logprob == pytest.approx(eager.avg_logprob, abs=1e-3)
        assert static.no_speech_prob == pytest.approx(eager.no_speech_prob, abs=1e-3)
        assert static.end_probability == pytest.approx(eager.end_probability, abs=1e-3)


@pytest.mark.slow
@pytest.mark.parametrize("max_steps", [1, 3, 4, 5, 9])
def test_the_graphs_stop_at_the_step_limit_as_the_eager_search(
    torch_runner: TorchWhisperRunner, max_steps: int
) -> None:
    """The host reads the tokens every few steps: a limit inside a block stops there."""
    runner = torch_runner
    model = runner.model
    mel, _ = runner._window(clip(QUESTION))  # noqa: SLF001
    prompt = runner._prompt_for("en")  # noqa: SLF001
    sot, eot, no_speech = runner._sot, runner._eot, runner._no_speech  # noqa: SLF001
    suppress, first = runner._suppress, runner._suppress_first  # noqa: SLF001
    graphs = WhisperGraphs(model, suppress, first, no_speech, capture=False)
    with torch.inference_mode():
        features = torch.from_numpy(mel[None])
        eager = model.generate(model.new_state(model.encode(features)), prompt,
                               prompt.index(sot), no_speech, eot, max_steps, suppress, first)
        graphs.encode(features)
        ours = graphs.generate(prompt, prompt.index(sot), eot, max_steps)
    assert len(eager.ids) == max_steps  # the limit, not the end of text, stopped it
    assert ours.ids == eager.ids and ours.logits.shape == eager.logits.shape
    assert ours.avg_logprob == pytest.approx(eager.avg_logprob, abs=1e-4)
