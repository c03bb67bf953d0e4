"""Running a model, grouped by what a user does: recording attention, decoding, looking inside one head,
attributing a prediction to its inputs, and analysing heads over a dataset."""
