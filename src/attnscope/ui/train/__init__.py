"""The Train page, by job: the run form (form.py), the jobs and their controls (runs.py), a run's live view
(progress.py)."""
