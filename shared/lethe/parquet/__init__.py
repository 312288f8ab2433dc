"""Parquet internals of the row-group splice; pure functions over bytes, no I/O.

- :mod:`lethe.parquet.thrift`: a schema-less, byte-exact Thrift compact protocol codec.
- :mod:`lethe.parquet.enums`: field ids of the Parquet Thrift structures, the format's enums.
- :mod:`lethe.parquet.model`: typed, read-only views of those structures.
- :mod:`lethe.parquet.footer`: where things lie: the footer (parsed from a tail, its
  round-trip guard), the byte-range rule of chunks and row groups, pages, index structures.
- :mod:`lethe.parquet.segments`: a new object as copies of the old one and new bytes; the
  bytes of the old one already fetched.
- :mod:`lethe.parquet.offsets`: moving absolute offsets (struct edits, offset maps).
- :mod:`lethe.parquet.decode`: decode one row group from its bytes alone.
- :mod:`lethe.parquet.reencode`: re-encode a group's remaining rows as its writer did.
- :mod:`lethe.parquet.fidelity`: whether a re-encoding stores what the original did (chunk
  shapes, schema meanings).
- :mod:`lethe.parquet.partial`: page-level copy-on-write of a group (only the pages holding
  erased rows re-encoded), or why not.
- :mod:`lethe.parquet.region`: the rebuilt index region's entries and their order.
- :mod:`lethe.parquet.locate`: a splice's first phase: the edits and the footer checked, the
  groups and index structures located.
- :mod:`lethe.parquet.splice`: plan a splice, as a pipeline of pure phases.
- :mod:`lethe.parquet.parts`: the multipart (or single PUT) upload plan of such an object.
- :mod:`lethe.parquet.validate`: a structural validator for whole files in memory.
- :mod:`lethe.parquet.pages`: page-level reads through the page index.

Nothing is re-exported here: import from the module that defines a name.

A splice, end to end (the caller does the I/O)::

    footer = parse_tail(tail, size)                       # 1 ranged GET (speculative tail)
    r = row_group_range(footer.metadata.row_groups[k])
    raw = get(r.start, r.end)                             # 1 ranged GET
    rows = decode_row_group(footer.metadata, k, raw)
    plan = splice(footer, {k: GroupEdit(raw, rows.filter(mask))}, [Extent(size - len(tail), tail)])
    upload = plan_parts(plan.segments, size)              # then UploadPartCopy / UploadPart
"""
