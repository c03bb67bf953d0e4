"""Pure plotly figure builders: records in, `go.Figure` out (no streamlit here)."""
