"""Captured attention as plain numpy data, the one family every view draws: one sentence's attention
(attention.py: AttentionRecord, its steps) and one forward pass of one head's arithmetic (forward.py).
Low in the design: the engine writes these, viz and ui read them; they import no torch."""
