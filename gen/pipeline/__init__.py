"""The pipeline that makes one run: sources read and products bound (shards), built stage by stage (executors;
spool hands a worker's records to the writer through files), written to the run folder (writer), with its report
and card (runner). The public entry is `gen.run` (gen/api/); this package is named for what it is, so that the
verb stays free."""
