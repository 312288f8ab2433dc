"""Footer reads of adoption: one suffix GET per file once a footer was seen (sized by the
largest footer so far), a second (of the missing bytes only) when a footer is longer, and
always exactly the footer and trailer bytes, whatever the first GET's size."""

from __future__ import annotations

import io
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import events
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lethe import errors
from lethe.adopt.footers import FooterGuess, read_footers, tail_bytes
from lethe.adopt.source import SourceFile
from lethe.storage.store import S3Store


def _put(s3: Any, bucket: str, key: str, t: pa.Table) -> tuple[SourceFile, bytes]:
    buf = io.BytesIO()
    pq.write_table(t, buf)
    body = buf.getvalue()
    etag = s3.put_object(Bucket=bucket, Key=key, Body=body)["ETag"]
    return SourceFile(f"s3://{bucket}/{key}", len(body), etag), body


def _footer(body: bytes) -> bytes:
    n = int.from_bytes(body[-8:-4], "little") + 8
    return body[-n:]


def test_files_of_one_writer_take_one_get_each(s3: Any, bucket: str) -> None:
    files, bodies = zip(
        *(_put(s3, bucket, f"raw/p-{i}.parquet", events(i * 50, 50)) for i in range(40)),
        strict=True,
    )
    wide = events(0, 50).append_column("extra_" + "x" * 300, pa.array(["v"] * 50))
    big, big_body = _put(s3, bucket, "raw/wide.parquet", wide)  # a much longer footer
    store = S3Store(bucket, client=s3)
    got = read_footers(store, [*files, big], threads=1)
    io_ = store.stats.snapshot()
    assert io_.total_requests == 1 + len(files) + 1 + 1  # the first file 2, the wide one 2
    footers = sum(len(_footer(b)) for b in (*bodies, big_body))
    assert footers <= io_.bytes_downloaded <= 1.1 * footers
    assert [f.nbytes for f in got] == [len(_footer(b)) for b in (*bodies, big_body)]
    assert got[-1].schema.names[-1].startswith("extra_")


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(guess=st.integers(min_value=0, max_value=40_000))
def test_the_tail_is_exactly_footer_and_trailer_whatever_the_guess(
    s3: Any, bucket: str, guess: int
) -> None:
    key = "raw/one.parquet"
    sf, body = _put(s3, bucket, key, events(0, 200))
    store = S3Store(bucket, client=s3)
    etag, size, tail = tail_bytes(store, sf, guess=guess)
    assert (etag, size, tail) == (sf.etag, len(body), _footer(body))
    # a short guess costs one more GET of the missing bytes only: nothing is read twice
    first = min(max(8, guess), len(body))
    assert store.stats.snapshot().bytes_downloaded == max(first, len(_footer(body)))


def test_a_non_parquet_object_is_refused_with_any_guess(s3: Any, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="raw/x.parquet", Body=b"not parquet at all, just text")
    head = s3.head_object(Bucket=bucket, Key="raw/x.parquet")
    sf = SourceFile(f"s3://{bucket}/raw/x.parquet", head["ContentLength"], head["ETag"])
    guess = FooterGuess()
    guess.saw(1000)
    for g in (0, guess()):
        with pytest.raises(errors.UnsupportedFile, match="not a Parquet file"):
            tail_bytes(S3Store(bucket, client=s3), sf, guess=g)
