"""A run: sources read and products bound (shards), built stage by stage (executors), written to the run folder
(writer), with its report and card (runner)."""
