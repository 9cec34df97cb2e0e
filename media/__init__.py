"""Audio conversion and framing, the shared MediaClock, outbound tracks, the avatar renderer.

Never loads a model. aiortc is imported only by `media.tracks`.
"""
