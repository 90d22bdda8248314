"""The foundation every stage stands on. It imports no stage and no application.

    schema.py    the trace format: tables, columns, file names, data requirements
    writer.py    RunWriter, the crash-safe writer of a run directory
    run.py       Run and open_run, the reader of a run directory
    findings.py  Finding, Diagnosis and the other results of an analysis
    rules.py     the @rule decorator and RuleSpec, the metadata of a rule
    config.py    Config, found and validated the way linters find theirs
    errors.py    the errors reported to the user as one line
"""
