"""The mismatch check's signatures and verdicts, on one process (the MPI side: tests/mpi/test_hardening.py)."""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

from swing_mpi import guard


def sig(count=10, datatype=MPI.DOUBLE, op=MPI.SUM, algorithm="swing-bw", dims=(4,), operation="allreduce",
        counts=None):
    return guard.signature(count=count, datatype=datatype, op=op, algorithm=algorithm, dims=dims,
                           operation=operation, counts=counts)


def test_equal_signatures_agree():
    rows = np.stack([sig()] * 5)
    assert guard.describe(rows) is None
    assert sig().shape == (guard.SIGNATURE_LEN,) and sig().dtype == np.int64


@pytest.mark.parametrize(("field", "other", "text"), [
    ("count", {"count": 11}, "count differs: 10 on ranks 0, 2-3; 11 on rank 1"),
    ("datatype", {"datatype": MPI.FLOAT}, "datatype differs: MPI_DOUBLE on ranks 0, 2-3; MPI_FLOAT on rank 1"),
    ("op", {"op": MPI.MAX}, "op differs: MPI.SUM on ranks 0, 2-3; MPI.MAX on rank 1"),
    ("algorithm", {"algorithm": "ring"}, "algorithm differs: swing-bw on ranks 0, 2-3; ring on rank 1"),
    ("dims", {"dims": (2, 2)}, "dims differs: 4 on ranks 0, 2-3; 2x2 on rank 1"),
    ("operation", {"operation": "allgather", "op": MPI.REPLACE},
     "operation differs: allreduce on ranks 0, 2-3; allgather on rank 1"),
])
def test_each_field_is_named_with_values_and_ranks(field, other, text):
    rows = np.stack([sig(), sig(**other), sig(), sig()])
    message, fields = guard.describe(rows)
    assert message == text
    assert list(fields) == [field]


def test_several_fields_at_once():
    rows = np.stack([sig(), sig(count=3, op=MPI.PROD)])
    message, fields = guard.describe(rows)
    assert list(fields) == ["count", "op"]
    assert fields["count"] == {"10": [0], "3": [1]}
    assert "MPI.PROD on rank 1" in message


def test_same_size_datatypes_differ_when_both_predefined():
    rows = np.stack([sig(datatype=MPI.INT64_T), sig(datatype=MPI.DOUBLE)])
    assert list(guard.describe(rows)[1]) == ["datatype"]


def test_a_derived_type_is_accepted_beside_a_predefined_one_of_the_same_size():
    contig = MPI.DOUBLE.Create_contiguous(1).Commit()
    try:
        assert guard.describe(np.stack([sig(), sig(datatype=contig)])) is None
        two = MPI.DOUBLE.Create_contiguous(2).Commit()
        try:
            message, fields = guard.describe(np.stack([sig(), sig(datatype=two)]))
            assert "derived datatype of size 16, extent 16 on rank 1" in message
        finally:
            two.Free()
    finally:
        contig.Free()


def test_user_ops_compare_by_commutativity_only():
    a = MPI.Op.Create(lambda x, y, t: None, commute=True)
    b = MPI.Op.Create(lambda x, y, t: None, commute=True)
    c = MPI.Op.Create(lambda x, y, t: None, commute=False)
    try:
        assert guard.describe(np.stack([sig(op=a), sig(op=b)])) is None
        message, _ = guard.describe(np.stack([sig(op=a), sig(op=c)]))
        assert "a user-defined op on rank 0; a user-defined op (non-commutative) on rank 1" in message
    finally:
        for op in (a, b, c):
            op.Free()


def test_long_dims_are_compared_too():
    d = (2,) * 20
    assert guard.describe(np.stack([sig(dims=d), sig(dims=d)])) is None
    assert guard.describe(np.stack([sig(dims=d), sig(dims=(2,) * 19 + (1,))])) is not None


def test_verify_on_one_rank_passes_and_the_error_is_a_value_error():
    guard.verify(MPI.COMM_SELF, count=4, datatype=MPI.INT, op=MPI.SUM, algorithm="ring", dims=(1,))
    assert issubclass(guard.CollectiveMismatchError, ValueError)


def test_a_rank_whose_arguments_failed_locally_is_named():
    rows = np.stack([sig(), np.zeros(guard.SIGNATURE_LEN, np.int64), sig()])
    rows[1][0] = 2  # ValueError
    message, fields = guard.describe(rows)
    assert list(fields) == ["arguments"]
    assert message == "arguments differs: valid on ranks 0, 2; rejected locally (ValueError) on rank 1"


def test_verify_raises_the_local_error_after_sharing_it():
    with pytest.raises(KeyError):
        guard.verify(MPI.COMM_SELF, error=KeyError("x"))


def test_recvcounts_with_the_same_total_are_compared():
    a, b = sig(operation="reduce_scatter", counts=[2, 2, 2, 2]), sig(operation="reduce_scatter", counts=[3, 1, 2, 2])
    message, fields = guard.describe(np.stack([a, a, b, a]))
    assert list(fields) == ["recvcounts"]
    assert "on rank 2" in message and "recvcounts with checksum" in message
    assert guard.describe(np.stack([a, a])) is None
    assert guard.counts_checksum(None) == 0 != guard.counts_checksum([])
