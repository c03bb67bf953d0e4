"""Streamlit glue: the only package besides app.py and pages/ that imports streamlit."""
