"""Audio stages of the voice loop that are independent of any device or engine: endpointing, listening, resampling."""
