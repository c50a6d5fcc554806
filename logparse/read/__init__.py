"""Bytes to records: the inputs (files, folders, .gz, stdin, follow, tee), blocks and the keyword
prefilter, launcher prefixes, folder layouts, and the fast path of progress lines. It knows log formats
(patterns/formats.yaml), never the analysis: nothing here imports `observe` or `decide`."""
