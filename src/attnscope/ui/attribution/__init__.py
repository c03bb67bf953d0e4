"""The Attribution page, by job: one sentence's attributions and the Step page's view of one step (sentence.py),
the tabs that compare methods (tabs.py), averages over a sample (samples.py)."""
