"""Model wrappers with no networking: vad, asr, llm, tts, face.

Every engine here is a synchronous class (NumPy/str in, NumPy/str out). Engines never import
asyncio, aiohttp or aiortc; `rtc_server` runs their blocking calls through executors.
"""
