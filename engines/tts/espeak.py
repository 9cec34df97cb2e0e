"""espeak-ng formant TTS through `espeakng-loader`'s shared library (ctypes), with phoneme events.

Light (RTF ~0.002) and varied: any espeak-ng voice and variant (`en-us`, `en-gb`, `en-us+f3`,
`en-gb-x-rp+m2`), rate and pitch, which makes it the tool for varied test speakers. Phoneme
timings come from the synth callback's phoneme events (IPA, sample positions).

espeak-ng keeps global state (one voice, one callback per process), so every synthesis holds one
module-wide lock and re-applies this instance's voice, rate and pitch.
"""

from __future__ import annotations

import ctypes
import logging
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from engines.tts.base import Speech, has_speech
from engines.tts.errors import InvalidInputError, ModelLoadError, TTSError
from engines.tts.phonemes import segments_to_timings

logger = logging.getLogger(__name__)

# espeak_ng's speak_lib.h constants.
_AUDIO_OUTPUT_SYNCHRONOUS = 2
_INIT_PHONEME_EVENTS = 0x0001
_INIT_PHONEME_IPA = 0x0002
_INIT_DONT_EXIT = 0x8000  # without it espeak-ng calls exit() on fatal errors
_CHARS_UTF8 = 1
_EVENT_LIST_TERMINATED = 0
_EVENT_PHONEME = 7
_RATE = 1
_PITCH = 3
_DEFAULT_WPM = 175  # espeak-ng's default speaking rate (words per minute)
# espeak-ng names British English plain "en"; accept the obvious language tags too.
_VOICE_ALIASES = {"en-gb": "en", "en-GB": "en", "en-uk": "en"}


class _Event(ctypes.Structure):
    _fields_ = [  # noqa: RUF012 - ctypes layout of espeak_EVENT
        ("type", ctypes.c_int),
        ("unique_identifier", ctypes.c_uint),
        ("text_position", ctypes.c_int),
        ("length", ctypes.c_int),
        ("audio_position", ctypes.c_int),
        ("sample", ctypes.c_int),
        ("user_data", ctypes.c_void_p),
        ("id", ctypes.c_char * 8),  # union; phoneme events carry up to 8 bytes of IPA
    ]


_CALLBACK = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.POINTER(_Event)
)


class _Library:
    """The process-wide espeak-ng instance; use only while holding `lock`."""

    def __init__(self) -> None:
        try:
            import espeakng_loader
        except ImportError as exc:  # pragma: no cover - depends on installed extras
            raise ModelLoadError("espeakng-loader is not installed (extra `tts-gpl`)") from exc
        lib = ctypes.CDLL(espeakng_loader.get_library_path())
        lib.espeak_Initialize.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
        lib.espeak_Initialize.restype = ctypes.c_int
        lib.espeak_SetVoiceByName.argtypes = [ctypes.c_char_p]
        lib.espeak_SetParameter.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int]
        lib.espeak_TextToPhonemes.argtypes = [
            ctypes.POINTER(ctypes.c_void_p), ctypes.c_int, ctypes.c_int
        ]
        lib.espeak_TextToPhonemes.restype = ctypes.c_char_p
        lib.espeak_Synth.argtypes = [
            ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint, ctypes.c_int, ctypes.c_uint,
            ctypes.c_uint, ctypes.c_void_p, ctypes.c_void_p,
        ]
        # espeak_Initialize wants the folder that *contains* espeak-ng-data.
        data_parent = str(Path(espeakng_loader.get_data_path()).parent).encode()
        rate = lib.espeak_Initialize(
            _AUDIO_OUTPUT_SYNCHRONOUS, 0, data_parent,
            _INIT_PHONEME_EVENTS | _INIT_PHONEME_IPA | _INIT_DONT_EXIT,
        )
        if rate <= 0:
            raise ModelLoadError(f"espeak_Initialize failed ({rate})")
        self.lib = lib
        self.sample_rate = int(rate)
        self.lock = threading.Lock()
        self.pcm: list[np.ndarray] = []
        self.events: list[tuple[str, int]] = []
        self.samples = 0
        self._callback = _CALLBACK(self._on_synth)  # kept alive: espeak holds the pointer
        lib.espeak_SetSynthCallback(self._callback)

    def _on_synth(self, wav: ctypes._Pointer, n: int, events: ctypes._Pointer) -> int:
        if n > 0 and wav:
            self.pcm.append(np.ctypeslib.as_array(wav, shape=(n,)).copy())
        i = 0
        while events[i].type != _EVENT_LIST_TERMINATED:
            ev = events[i]
            if ev.type == _EVENT_PHONEME:
                self.events.append((bytes(ev.id).decode("utf-8", "ignore"), int(ev.sample)))
            i += 1
        return 0  # 0 = continue synthesis


_library: _Library | None = None
_library_lock = threading.Lock()


def _get_library() -> _Library:
    global _library
    with _library_lock:
        if _library is None:
            _library = _Library()
        return _library


# espeak_TextToPhonemes' phoneme mode: IPA (bit 1), the letters of one phoneme tied (bit 7)
# with "^" (bits 8-23), so that "aɪ" and "a ɪ" can be told apart.
_IPA_TIED = 0x02 | 0x80 | (ord("^") << 8)


def ipa(text: str, voice: str = "en-us") -> str:
    """espeak-ng's IPA for `text` (stress marks kept, "^" inside multi-letter phonemes, words
    separated by spaces, clauses by spaces: punctuation is not kept)."""
    lib = _get_library()
    data = ctypes.create_string_buffer(text.encode("utf-8") + b"\0")
    pointer = ctypes.c_void_p(ctypes.addressof(data))
    out: list[str] = []
    with lib.lock:
        if lib.lib.espeak_SetVoiceByName(voice.encode()) != 0:
            raise ModelLoadError(f"unknown espeak-ng voice {voice!r}")
        while pointer.value:
            phonemes = lib.lib.espeak_TextToPhonemes(ctypes.byref(pointer), _CHARS_UTF8, _IPA_TIED)
            if phonemes:
                out.append(phonemes.decode("utf-8", "ignore").strip())
    return " ".join(p for p in out if p)


class EspeakTTS:
    """espeak-ng voice; `speed` scales the default 175 wpm, `pitch` is 0..100 (None = 50)."""

    def __init__(self, voice: str = "en-us", *, speed: float = 1.0, pitch: int | None = None):
        if speed <= 0:
            raise InvalidInputError(f"speed must be > 0, got {speed}")
        if pitch is not None and not 0 <= pitch <= 100:
            raise InvalidInputError(f"pitch must be in 0..100, got {pitch}")
        self._lib = _get_library()
        self.voice = _VOICE_ALIASES.get(voice.split("+")[0], voice.split("+")[0]) + (
            "+" + voice.split("+", 1)[1] if "+" in voice else ""
        )
        self._rate = max(80, min(450, round(_DEFAULT_WPM * speed)))  # espeak's accepted range
        self._pitch = 50 if pitch is None else pitch
        self.sample_rate: int = self._lib.sample_rate
        with self._lib.lock:
            self._apply()  # fail early on an unknown voice name

    def _apply(self) -> None:
        lib = self._lib.lib
        if lib.espeak_SetVoiceByName(self.voice.encode()) != 0:
            raise ModelLoadError(f"unknown espeak-ng voice {self.voice!r}")
        lib.espeak_SetParameter(_RATE, self._rate, 0)
        lib.espeak_SetParameter(_PITCH, self._pitch, 0)

    def synthesize(self, text: str) -> Iterator[Speech]:
        """Yield one `Speech` for the whole text (espeak is fast enough not to split it)."""
        if not has_speech(text):
            return
        data = text.encode("utf-8")
        with self._lib.lock:
            self._apply()
            self._lib.pcm, self._lib.events = [], []
            rc = self._lib.lib.espeak_Synth(data, len(data) + 1, 0, 0, 0, _CHARS_UTF8, None, None)
            pcm_parts, events = self._lib.pcm, self._lib.events
            self._lib.pcm, self._lib.events = [], []
        if rc != 0:
            raise TTSError(f"espeak_Synth failed ({rc}) on {text[:40]!r}")
        if not pcm_parts:
            return
        pcm = np.concatenate(pcm_parts).astype(np.int16, copy=False)
        yield Speech(
            pcm=pcm,
            sample_rate=self.sample_rate,
            phonemes=segments_to_timings(events, len(pcm), self.sample_rate),
            text=text,
        )
