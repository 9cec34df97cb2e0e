"""The avatar renderer: portrait + landmark offsets -> RGB frames, with idle blinks and motion.

`AvatarRenderer(image, landmarks)` once per portrait (landmarks from
`engines.portrait.detect_portrait_landmarks`; this package never loads a model), then
`renderer.session(fps, seed)` per session and `Avatar.frame(index, offsets | None)` per frame.
"""

from media.avatar.motion import IdleMotion, Pose
from media.avatar.renderer import Avatar, AvatarRenderer, frame_portrait

__all__ = ["Avatar", "AvatarRenderer", "IdleMotion", "Pose", "frame_portrait"]
