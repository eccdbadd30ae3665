"""`gen view`: a local web viewer for run folders (the optional `view` extra)."""
