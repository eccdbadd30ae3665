"""The pipeline that makes one run. The public entry is `gen.run` (gen/api/); this package is named for what it
is, so that the verb stays free.

    options    RunOptions: where the run goes, how much it reads, who does the work, how its LLM calls go
    shards     sources read and products bound (Prepared), one shard's products built, validated and counted
    executors  who runs the shards of a stage: this process, a pool of forked workers, Ray, the LLM batches
    spool      a worker's records handed to the writer through files
    writer     the run folder's record files, appended in conversation order
    runner     the run from start to end: stages, report (run.json), card, the folder put in place
"""
