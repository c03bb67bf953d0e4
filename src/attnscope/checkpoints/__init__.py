"""The one-file checkpoint format, the registry of shipped and user models, import and averaging."""
