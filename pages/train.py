"""Train a model in the background and watch it learn: curves, samples, attention forming."""
from attnscope.ui.navigation import open_page
from attnscope.ui.train import form, progress, runs

open_page("Train", needs_model=False)
config, sample = form.run_form()
runs.controls(config, sample)
progress.live_view()
