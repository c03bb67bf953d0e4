"""Train a model in the background and watch it learn: curves, samples, attention forming."""
from attnscope.ui.navigation import Menu, open_page
from attnscope.ui.train import form, progress, runs

MENU = Menu("Train", ":material/model_training:", section="Build", order=10)
open_page(MENU, needs_model=False)
config, sample = form.run_form()
runs.controls(config, sample)
progress.live_view()
