"""Conversation turns and the audio session built on them."""
