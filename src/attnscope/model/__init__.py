"""The network: configuration, the Transformer, tokenizers and device choice (knows nothing of recording)."""
