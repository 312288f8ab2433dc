"""The cost-planned splice on S3 (moto's server): each file's level chosen by predicted cost.

Three files, three winners: one row in a large file (page level: only its pages are
re-encoded), many rows in one row group of a large file (row-group splice: the other groups
copied server-side), rows in most groups of a small file (a rewrite through the client: one
GET, one PUT). Whatever the level, the new file holds exactly the remaining rows in order,
and no erased value is left in its bytes.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import lethe
from lethe.erasure.erase import SpliceResult, splice_file
from lethe.parquet.costs import CostModel

CAP = CostModel().max_copy_ratio  # no plan copies more than this times the file
SCHEMA = pa.schema([("id", pa.int64(), False), ("name", pa.string()), ("blob", pa.binary())])


def rows(n: int) -> pa.Table:
    rng = np.random.default_rng(n)
    raw = rng.integers(0, 256, n * 1000, dtype=np.uint8).tobytes()
    offsets = pa.array(np.arange(0, (n + 1) * 1000, 1000, dtype=np.int32))
    blob = pa.Array.from_buffers(pa.binary(), n, [None, offsets.buffers()[1], pa.py_buffer(raw)])
    ids = np.arange(n, dtype=np.int64)
    names = pc.binary_join_element_wise("name-", pa.array(ids).cast(pa.string()), "#", "")
    return pa.table({"id": ids, "name": names, "blob": blob}, schema=SCHEMA)


def erase_ids(
    uri: str, n: int, group_bytes: int, pick: Callable[[Sequence[int]], list[int]]
) -> SpliceResult:
    """A table of ``n`` rows in one file; delete the rows ``pick`` chooses from the groups'
    first rows and splice their groups."""
    t = lethe.Table.create(uri, SCHEMA, key="id", row_group_bytes=group_bytes)
    t.append(rows(n))
    starts = [int(x) for x in np.cumsum([0] + [g.rows for g in t.manifest.files[0].row_groups])]
    victims = pick(starts)
    t.delete([("id", "in", victims)])
    t = lethe.Table.open(uri)
    [f] = t.manifest.files
    groups = sorted({int(np.searchsorted(starts, v, side="right") - 1) for v in victims})
    s = splice_file(t.context, f, groups)
    assert s.new is not None
    body = t.store.get(t.key_of(s.new.path)).body
    want = rows(n).filter(pc.invert(pc.is_in(pc.field("id"), pa.array(victims, pa.int64()))))
    assert pq.read_table(io.BytesIO(body)).equals(want)
    for v in victims:
        assert f"name-{v}#".encode() not in body
    assert s.choice is not None
    chosen = s.choice.total(s.choice.level)
    assert all(chosen <= s.choice.total(lv) for lv in s.choice.predicted)
    return s


def test_one_row_in_a_large_file_is_spliced_page_by_page(table_uri: str) -> None:
    n = 20_000  # ~20 MiB: groups of ~4 MiB, pages of ~1 MiB
    s = erase_ids(table_uri, n, 4 << 20, lambda starts: [starts[3] - 5])
    assert s.choice is not None and s.choice.level == "page", s.choice
    assert s.granularity.level == "page"
    # far less re-encoded than the group, far less moved than a rewrite
    page, group = s.choice.predicted["page"], s.choice.predicted["row_group"]
    assert page.reencoded < group.reencoded / 2
    assert s.bytes_uploaded + s.bytes_downloaded < s.old.size * 0.6
    assert s.bytes_copied <= CAP * s.old.size


def test_many_rows_of_one_group_splice_that_group(table_uri: str) -> None:
    n = 20_000
    # every page of group 2 holds one
    s = erase_ids(table_uri, n, 4 << 20, lambda starts: list(range(starts[2], starts[3], 40)))
    assert s.choice is not None and s.choice.level == "row_group", s.choice
    assert s.choice.reason is not None and "every page" in s.choice.reason
    assert "page" not in s.choice.predicted  # judged hopeless before its planning
    assert s.granularity.level == "row_group"
    group = s.old.row_groups[2].length
    assert s.bytes_downloaded < 2 * group  # the group (and part fills), not the file
    assert 0 < s.bytes_copied <= CAP * s.old.size


def test_rows_in_most_groups_of_a_small_file_rewrite_it(table_uri: str) -> None:
    n = 3_000  # ~3 MiB: groups of ~512 KiB; too small for server-side copies
    s = erase_ids(table_uri, n, 512 << 10, lambda starts: [x + 7 for x in starts[1:-1]])
    assert s.choice is not None and s.choice.level == "rewrite", s.choice
    assert s.bytes_copied == 0
    assert s.io.count("get") == 2, s.io.describe()  # the tail, then the rest in one GET
    assert s.io.count("put") == 1, s.io.describe()
    assert s.choice.total("rewrite") < s.choice.total("row_group")


@pytest.mark.parametrize("page_level", [True, False])
def test_the_level_never_costs_more_than_a_rewrite(table_uri: str, page_level: bool) -> None:
    t = lethe.Table.create(table_uri, SCHEMA, key="id", row_group_bytes=1 << 20)
    t.append(rows(6_000))
    t.delete([("id", "in", [10, 2_500, 5_999])])
    t = lethe.Table.open(table_uri)
    [f] = t.manifest.files
    s = splice_file(t.context, f, range(len(f.row_groups)), page_level=page_level)
    assert s.choice is not None
    assert s.choice.total(s.choice.level) <= s.choice.total("rewrite")
    if not page_level:
        assert "page" not in s.choice.predicted
