"""The foundation every stage stands on. It imports no stage and no application.

    schema.py        the trace format: tables, columns, file names, data requirements
    formats.py       the kinds of log a run can come from, and Source (a run's kind and path)
    writer.py        RunWriter, the crash-safe writer of a run directory
    batches.py       rows as Arrow record batches of the trace's schemas
    files.py         atomic writes through temporary files nobody could have planted
    reader.py        reading a run directory's files: rank metadata and table parts
    run.py           Run and open_run: one run as rules see it (reader, status and views joined)
    run_status.py    a run's status: its metadata, corrected for writers that are gone
    run_views.py     the cached views rules share, and how a distributed run's ranks merge
    shards.py        sharded (FSDP2) parameters: their ranks' statistics merged into one
    findings.py      Finding, Diagnosis and the other results of an analysis
    rules.py         the @rule decorator and RuleSpec, the metadata of a rule
    config.py        Config, found and validated the way linters find theirs
    errors.py        the errors reported to the user as one line
    comparison.py    RunDiff, the result of comparing two runs (`tracelab diff`)
    batch_schema.py  the rows `tracelab batch` writes: one per run, one per finding
"""
