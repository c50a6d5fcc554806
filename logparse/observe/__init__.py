"""Records to observations: one module per kind of fact (tracebacks, catalog hits, bare failure lines,
progress, metrics, environment, collectives), each fed record by record and asked for a frozen
snapshot at the end. Nothing here decides a verdict."""
