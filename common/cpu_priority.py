"""Thread priorities: when the CPU is short, the microphone's path goes first.

On a slow or busy machine every stage wants a core at once: the LLM's decode, the TTS, the
face, rendering and encoding the video. The listening side (the event loop with the VAD,
the ASR's pause decode, the turn model) then waited behind them: on a 2-core AVX2 VM an
answer played on for 5-13 s over the user's interruption, and the interrupting question was
never transcribed (issue 23). Linux keeps a nice value per thread, and a thread a pool or a
library starts inherits its creator's, so lowering the priority of the threads that do the
bulk work (and so of llama.cpp's worker threads, started from its decode thread) leaves the
listening threads, at the process's own priority, first in line. This only matters when the
cores are contended; on an idle machine every thread gets what it asks for.

`lower_this_thread(levels)` adds `levels` to the calling thread's nice value (no-op where the
OS has no per-thread priorities); raising a priority again needs privileges, so it is done
once, at a thread's start.
"""

from __future__ import annotations

import logging
import os
import threading

logger = logging.getLogger(__name__)

# Nice levels below the process, by what a thread does (0: listening, the event loop).
SPEAKING = 2  # TTS and the face model: the voice must keep pace with playback
VIDEO = 4  # rendering the avatar's frames: a late frame is dropped, not waited for
THINKING = 6  # the LLM's decode (its answer is paced by the voice, pacing.py)


def lower_this_thread(levels: int) -> None:
    """Lower the calling thread's priority by `levels` nice steps (best effort)."""
    if levels <= 0 or not hasattr(os, "setpriority"):
        return
    tid = threading.get_native_id()
    try:
        current = os.getpriority(os.PRIO_PROCESS, tid)
        os.setpriority(os.PRIO_PROCESS, tid, min(19, current + levels))
    except OSError as exc:  # a sandbox without the call: priorities stay as they were
        logger.debug("cannot lower thread %d's priority: %s", tid, exc)
